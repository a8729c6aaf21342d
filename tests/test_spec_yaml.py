"""The YAML reader: YAML 1.2 core scalars, positions, and the hazards PyYAML lets through."""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml

from runspec.spec.yamlload import MAX_BYTES, MAX_NODES, Mark, load_yaml


def _value(text: str) -> Any:
    doc, problems = load_yaml(f"v: {text}\n", "t.yaml")
    assert problems == []
    assert doc is not None
    return doc.data["v"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("6:00", "6:00"),  # PyYAML (YAML 1.1) says 360
        ("017", 17),  # YAML 1.1 says 15 (octal)
        ("0o17", 15),
        ("0x1F", 31),
        ("+12", 12),
        ("-3", -3),
        ("1_000", "1_000"),
        ("yes", "yes"),
        ("no", "no"),
        ("on", "on"),
        ("off", "off"),
        ("y", "y"),
        ("true", True),
        ("True", True),
        ("FALSE", False),
        ("tRUE", "tRUE"),
        ("~", None),
        ("null", None),
        ("", None),
        ("1.5", 1.5),
        ("1e3", 1000.0),
        (".5", 0.5),
        ("-.inf", -math.inf),
        (".Inf", math.inf),
        ("2026-11-30", "2026-11-30"),  # no timestamps in the core schema
        ("'017'", "017"),
        ('"true"', "true"),
        ("!!str 5", "5"),
        ("!!float 1", 1.0),
        ("0b101", "0b101"),
    ],
)
def test_scalars_resolve_as_yaml_1_2_core(text: str, expected: Any) -> None:
    value = _value(text)
    assert value == expected
    assert type(value) is type(expected)


def test_nan_is_a_float() -> None:
    assert math.isnan(_value(".nan"))


def test_pyyaml_alone_would_have_read_these_differently() -> None:
    # Why this module exists: the same text through PyYAML's safe_load.
    assert yaml.safe_load("v: 6:00")["v"] == 360
    assert yaml.safe_load("v: on")["v"] is True
    assert yaml.safe_load("a: 1\na: 2")["a"] == 2


def test_positions_of_keys_and_values_are_kept() -> None:
    text = "runspec: 1\ntrain:\n  model: yolo9-t\n  args:\n    lr0: 0.01\nlist:\n  - a\n  - b\n"
    doc, problems = load_yaml(text, "t.yaml")
    assert problems == [] and doc is not None
    assert doc.key_mark(("train", "model")) == Mark(3, 3)
    assert doc.value_mark(("train", "model")) == Mark(3, 10)
    assert doc.key_mark(("train", "args", "lr0")) == Mark(5, 5)
    assert doc.value_mark(("train", "args", "lr0")) == Mark(5, 10)
    assert doc.value_mark(("list", 1)) == Mark(8, 5)
    # A path that does not exist falls back to its nearest ancestor.
    assert doc.value_mark(("train", "args", "nope")) == doc.value_mark(("train", "args"))


def test_every_duplicate_key_is_reported_at_its_second_occurrence() -> None:
    text = "a: 1\nb:\n  c: 1\n  c: 2\na: 3\n"
    doc, problems = load_yaml(text, "t.yaml")
    assert doc is not None and doc.data == {"a": 1, "b": {"c": 1}}
    assert [(p.line, p.column, p.pointer) for p in problems] == [(4, 3, "/b/c"), (5, 1, "/a")]
    assert "first at line 3" in problems[0].message


@pytest.mark.timeout(10)
def test_a_recursive_alias_ends_in_a_problem_not_a_hang() -> None:
    doc, problems = load_yaml("a: &a [*a, *a]\n", "t.yaml")
    assert doc is None
    assert problems[0].pointer == "" and "nested more than" in problems[0].message


@pytest.mark.timeout(10)
def test_a_billion_laughs_is_refused_after_the_node_limit() -> None:
    layers = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        refs = ", ".join([f"*l{i - 1}"] * 10)
        layers.append(f"l{i}: &l{i} [{refs}]")
    doc, problems = load_yaml("\n".join(layers) + "\n", "t.yaml")
    assert doc is None
    assert f"more than {MAX_NODES:,} YAML nodes" in problems[0].message


def test_aliases_within_the_limit_are_expanded() -> None:
    doc, problems = load_yaml("a: &x {b: [1, 2]}\nc: *x\n", "t.yaml")
    assert problems == [] and doc is not None
    assert doc.data == {"a": {"b": [1, 2]}, "c": {"b": [1, 2]}}


def test_size_limit_counts_bytes_not_characters() -> None:
    text = "a: " + "é" * ((MAX_BYTES - 3) // 2 + 1) + "\n"  # fewer characters than bytes
    assert len(text) <= MAX_BYTES < len(text.encode("utf-8"))
    doc, problems = load_yaml(text, "t.yaml")
    assert doc is None and "at most 1 MiB" in problems[0].message


def test_exactly_one_mebibyte_is_allowed() -> None:
    text = "a: 1\n" + "#" * (MAX_BYTES - 6) + "\n"
    assert len(text.encode("utf-8")) == MAX_BYTES
    doc, problems = load_yaml(text.encode("utf-8"), "t.yaml")
    assert problems == [] and doc is not None


def test_non_utf8_bytes_are_located() -> None:
    doc, problems = load_yaml(b"a: 1\nname: caf\xe9\n", "t.yaml")
    assert doc is None
    assert (problems[0].line, problems[0].column) == (2, 10)
    assert "0xe9" in problems[0].message


def test_utf16_is_not_utf8() -> None:
    doc, problems = load_yaml("a: 1\n".encode("utf-16"), "t.yaml")
    assert doc is None and "not UTF-8" in problems[0].message


def test_a_parse_error_keeps_the_parsers_position() -> None:
    doc, problems = load_yaml("a: 1\nb: [1, 2\nc: 3\n", "t.yaml")
    assert doc is None
    assert problems[0].pointer == ""
    assert problems[0].line == 3
    assert problems[0].message.startswith("not valid YAML: ")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("# only a comment\n", "empty"),
        ("- a\n", "a list"),
        ("42\n", "single value"),
        ("a: 1\n---\nb: 2\n", "more than one YAML document"),
        ("a: 1\n...\n---\nb: 2\n", "more than one YAML document"),
    ],
)
def test_whole_file_problems_use_the_empty_pointer(text: str, words: str) -> None:
    doc, problems = load_yaml(text, "t.yaml")
    assert doc is None
    assert len(problems) == 1
    assert problems[0].pointer == ""
    assert words in problems[0].message


def test_one_explicit_document_is_fine() -> None:
    doc, problems = load_yaml("---\na: 1\n...\n", "t.yaml")
    assert problems == [] and doc is not None and doc.data == {"a": 1}


def test_keys_must_be_strings() -> None:
    doc, problems = load_yaml("1: a\n? [x]\n: b\nok: c\n", "t.yaml")
    assert doc is not None and doc.data == {"ok": "c"}
    assert [p.line for p in problems] == [1, 2]


def test_a_str_with_a_lone_surrogate_is_refused_not_crashed_on() -> None:
    doc, problems = load_yaml("a: 1\nb: x\ud800\n", "t.yaml")
    assert doc is None
    assert (problems[0].line, problems[0].column) == (2, 5)
    assert "lone surrogate" in problems[0].message
