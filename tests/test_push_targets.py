"""Which push targets exist is one explicit tuple, and the push side never imports the
preflight (both import runspec.checkresult instead)."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest

from runspec.push.base import PushFailed
from runspec.push.dirtarget import DirTarget
from runspec.push.hub import HubTarget
from runspec.push.targets import TARGETS, kind_of
from runspec.spec.model import HubTarget as HubSpec
from runspec.spec.model import PushSpec

PUSH = Path(__file__).resolve().parent.parent / "runspec" / "push"


def test_each_push_key_names_its_target_and_a_subclass_takes_nothing_over() -> None:
    class Slow(DirTarget):  # a test's slow volume, say: defined, never chosen
        pass

    assert kind_of(PushSpec(hub=HubSpec("me/run", True))) is HubTarget
    assert kind_of(PushSpec(dir=Path("/mnt/vol"))) is DirTarget
    with pytest.raises(PushFailed, match="names no target"):
        kind_of(PushSpec())
    keys = [kind.key for kind in TARGETS]
    assert len(set(keys)) == len(keys)
    assert set(keys) <= {f.name for f in fields(PushSpec)}


def test_no_module_of_the_push_side_imports_the_preflight() -> None:
    for path in PUSH.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("runspec.preflight"), path.name
