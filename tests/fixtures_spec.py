"""Fixtures for the spec loader's tests: a minimal valid spec and a way to write variants."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

SPEC_REPO = Path(__file__).resolve().parent.parent
SPEC_CASES = SPEC_REPO / "tests" / "specs"

MINIMAL_SPEC = """\
runspec: 1
name: minimal
dataset:
  synthetic: {}
train:
  model: yolo9-t
  epochs: 3
budget:
  wall_clock: 10m
"""


@pytest.fixture
def spec_minimal_text() -> str:
    return MINIMAL_SPEC


@pytest.fixture
def spec_file(tmp_path: Path) -> Callable[..., Path]:
    """Writes spec text (str or bytes) to a file under tmp_path and returns its path."""

    def write(text: str | bytes, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path

    return write
