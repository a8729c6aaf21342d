"""Generated spec trees, valid and mutated: validation answers with its own findings only,
and every finding points at a line of the file."""

from __future__ import annotations

import copy
import os
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runspec.errors import Problem
from runspec.spec.loader import check_spec_text
from runspec.spec.rules import forbidden_env
from runspec.spec.yamlload import core_tag
from runspec.units import parse_duration


class Yaml12Dumper(yaml.SafeDumper):
    """Quotes the strings YAML 1.2 would read as something else (PyYAML quotes by 1.1)."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "'" if core_tag(data) != "tag:yaml.org,2002:str" else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


Yaml12Dumper.add_representer(str, _represent_str)


def _dump(tree: dict[str, Any]) -> str:
    return yaml.dump(tree, Dumper=Yaml12Dumper, sort_keys=False, allow_unicode=True)


SETTINGS = settings(
    max_examples=int(os.environ.get("SPEC_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

names = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,30}", fullmatch=True)
# At most 3 parts of 9d, 99h, 99m or 99s: never past the 30-day limit.
durations = st.lists(
    st.one_of(
        st.tuples(st.integers(1, 9), st.just("d")),
        st.tuples(st.integers(1, 99), st.sampled_from("smh")),
    ),
    min_size=1,
    max_size=3,
).map(lambda parts: "".join(f"{n}{u}" for n, u in parts))
datasets = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "train": st.integers(1, 50),
            "val": st.integers(1, 50),
            "imgsz": st.integers(32, 1024),
            "seed": st.integers(0, 99),
        },
    ).map(lambda s: {"synthetic": s}),
    st.just({"path": "/data/ds/data.yaml"}),
    st.just({"hub": {"repo": "org/ds", "file": "ds.tar"}, "data": "ds/data.yaml"}),
)


@st.composite
def trains(draw: st.DrawFn) -> dict[str, Any]:
    epochs = draw(st.integers(1, 500))
    gpus = draw(st.integers(1, 8))
    device = draw(st.sampled_from(["cpu", "all", gpus - 1, ",".join(str(g) for g in range(gpus))]))
    train: dict[str, Any] = {"model": draw(st.sampled_from(["yolo9-t", "LibreYOLO9s.pt"]))}
    train["epochs"] = epochs
    train["device"] = device
    train["batch"] = gpus * draw(st.integers(1, 16)) if isinstance(device, str) else -1
    train["save_period"] = draw(st.integers(1, epochs))
    if draw(st.booleans()):
        train["args"] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "lr0": st.floats(0.0001, 1),
                    "workers": st.integers(0, 16),
                    "warmup-epochs": st.integers(0, 5),
                    "amp": st.booleans(),
                },
            )
        )
    return train


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "runspec": 1,
        "name": draw(names),
        "dataset": draw(datasets),
        "train": draw(trains()),
        "budget": {"wall_clock": draw(durations)},
    }
    if draw(st.booleans()):
        spec["push"] = draw(st.sampled_from([{"dir": "/mnt/v"}, {"hub": {"repo": "o/r"}}]))
        spec["push"]["every"] = draw(durations)
        spec["finish"] = {"action": draw(st.sampled_from(["destroy", "stop", "none"]))}
    if draw(st.booleans()):
        spec["env"] = draw(
            st.dictionaries(
                st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True).filter(
                    lambda n: (
                        not any(w in n for w in ("TOKEN", "SECRET", "PASSWORD", "KEY"))
                        and forbidden_env(n) is None
                    )
                ),
                st.one_of(st.booleans(), st.integers(), st.text("abc/ :", max_size=5)),
                max_size=3,
            )
        )
    return spec


def _inside(problems: list[Problem], text: str) -> None:
    last = text.count("\n") + 1
    for p in problems:
        assert 1 <= p.line <= last, str(p)
        assert p.column >= 1, str(p)


@SETTINGS
@given(specs())
def test_generated_valid_specs_load_with_their_values(tree: dict[str, Any]) -> None:
    text = _dump(tree)
    spec, problems = check_spec_text(text, "gen.yaml")
    assert problems == [], text
    assert spec is not None
    assert spec.name == tree["name"]
    assert spec.budget.wall_clock == parse_duration(tree["budget"]["wall_clock"])
    assert spec.train.epochs == tree["train"]["epochs"]


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.sampled_from(["6:00", "yes", "0s", "1h", "auto", "-1", "0,0"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _paths(value, (*path, i))
    return found


@SETTINGS
@given(specs(), st.data())
def test_mutated_specs_are_answered_with_located_problems(
    tree: dict[str, Any], data: st.DataObject
) -> None:
    tree = copy.deepcopy(tree)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(tree)))
        parent: Any = tree
        for part in path[:-1]:
            parent = parent[part]
        action = data.draw(st.sampled_from(["replace", "delete", "add"]))
        if not path:
            action = "add"
        if action == "replace":
            parent[path[-1]] = data.draw(values)
        elif action == "delete":
            del parent[path[-1]]
        else:
            target = parent[path[-1]] if path else tree
            if isinstance(target, dict):
                target[data.draw(st.text(min_size=1, max_size=8))] = data.draw(values)
    text = _dump(tree)
    spec, problems = check_spec_text(text, "mut.yaml")
    assert (spec is None) == bool(problems)
    _inside(problems, text)


@SETTINGS
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_arbitrary_text_never_breaks_validation(raw: str | bytes) -> None:
    spec, problems = check_spec_text(raw, "any.yaml")
    assert spec is None and problems
    text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    _inside(problems, text)


@SETTINGS
@given(specs(), st.integers(0, 400), st.text(max_size=3))
def test_spliced_text_never_breaks_validation(tree: dict[str, Any], at: int, junk: str) -> None:
    text = _dump(tree)
    at = min(at, len(text))
    spliced = text[:at] + junk + text[at:]
    spec, problems = check_spec_text(spliced, "splice.yaml")
    assert (spec is None) == bool(problems)
    _inside(problems, spliced)
