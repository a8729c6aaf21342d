"""The published schema: valid 2020-12, complete, and in step with the loader's parts."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from huggingface_hub.utils import HFValidationError, validate_repo_id
from hypothesis import given, settings
from hypothesis import strategies as st

from runspec.cli import main
from runspec.spec.loader import SCHEMA_PATH, schema
from runspec.spec.trainargs import args_schema
from runspec.spec.yamlload import load_yaml
from runspec.units import DURATION_PATTERN, SIZE_PATTERN

REPO = Path(__file__).resolve().parent.parent
PUBLISHED = REPO / "schemas" / "runspec.schema.json"


def _objects(node: Any, pointer: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema of a mapping that declares its properties, with its pointer."""
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            yield pointer, node
        for key, value in node.items():
            yield from _objects(value, f"{pointer}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _objects(value, f"{pointer}/{i}")


def test_the_schema_is_valid_draft_2020_12() -> None:
    document = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(document)


def test_the_package_reads_the_published_file_through_a_relative_link() -> None:
    link = REPO / "runspec" / "schema" / "runspec.schema.json"
    assert link.is_symlink()
    assert os.readlink(link) == "../../schemas/runspec.schema.json"
    assert SCHEMA_PATH.resolve() == PUBLISHED.resolve()


def test_every_object_refuses_unknown_keys_and_every_field_is_described() -> None:
    objects = dict(_objects(schema()))
    assert len(objects) >= 12
    for pointer, node in objects.items():
        assert node.get("additionalProperties") is False, pointer
        for key, prop in node["properties"].items():
            assert prop.get("description"), f"{pointer}/{key} has no description"
    env = schema()["properties"]["env"]
    assert "properties" not in env and env["additionalProperties"]["type"]


def test_patterns_come_from_the_one_duration_and_size_parsers() -> None:
    defs = schema()["$defs"]
    assert defs["duration"]["pattern"] == DURATION_PATTERN
    assert defs["size"]["pattern"] == SIZE_PATTERN


def test_train_args_section_is_generated_from_the_option_list() -> None:
    assert schema()["$defs"]["trainArgs"]["properties"] == args_schema()


_REPO_RE = re.compile(schema()["$defs"]["hubRepo"]["pattern"])


def _hub_accepts(repo_id: str) -> bool:
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return False
    return repo_id.count("/") == 1


@pytest.mark.parametrize(
    "repo_id",
    [
        "my-org/my-run",
        "a/b",
        "Org_1/x.y-z",
        "org/run.git",
        "org--x/y",
        "org/a..b",
        "-a/b",
        "a/b-",
        "org/",
        "/name",
        "a/b/c",
        "name",
        "o/" + "n" * 96,
        "o/" + "n" * 97,
    ],
)
def test_hub_repo_pattern_agrees_with_huggingface_hub(repo_id: str) -> None:
    assert bool(_REPO_RE.search(repo_id)) == _hub_accepts(repo_id)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="aZ9-_./", max_size=10))
def test_hub_repo_pattern_agrees_on_generated_ids(repo_id: str) -> None:
    assert bool(_REPO_RE.search(repo_id)) == _hub_accepts(repo_id)


def test_runspec_schema_prints_the_published_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == PUBLISHED.read_text(encoding="utf-8")


VALID = sorted((REPO / "tests" / "specs" / "valid").glob("*.yaml")) + sorted(
    (REPO / "specs").glob("*.yaml")
)


@pytest.mark.parametrize("path", VALID, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_an_editor_using_the_schema_alone_accepts_every_valid_spec(path: Path) -> None:
    # Editors validate the raw YAML, dashed train.args keys included, without runspec.
    doc, problems = load_yaml(path.read_bytes(), str(path))
    assert problems == [] and doc is not None
    errors = [e.message for e in jsonschema.Draft202012Validator(schema()).iter_errors(doc.data)]
    assert errors == []


def test_the_schema_alone_refuses_a_misspelled_dashed_option() -> None:
    args_only = {"$ref": "#/$defs/trainArgs", "$defs": schema()["$defs"]}
    validator = jsonschema.Draft202012Validator(args_only)
    assert validator.is_valid({"warmup-epochs": 3, "sync-bn": False})
    assert not validator.is_valid({"warmup-epoch": 3})
    assert not validator.is_valid({"warmup-epochs": "three"})  # the alias carries the type
