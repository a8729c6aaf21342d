"""Whole runs through the real `runspec run` command: spec files and the process that runs them.

Every run trains yolo9-t from scratch for real on a tiny synthetic dataset, on the CPU.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

RUNSPEC = [sys.executable, "-m", "runspec"]


def base_spec(name: str, epochs: int = 3) -> dict[str, Any]:
    return {
        "runspec": 1,
        "name": name,
        "dataset": {"synthetic": {"train": 8, "val": 4, "imgsz": 64, "classes": 3, "seed": 0}},
        "train": {
            "model": "yolo9-t",
            "epochs": epochs,
            "batch": 4,
            "imgsz": 32,
            "device": "cpu",
            # save_period: the default (every 10 epochs, or the last when fewer). A test that
            # needs every epoch's weights/epoch_N.pt says save_period: 1 itself; each one is
            # 35 MB written, staged, pushed and hashed.
            # save_plots: LibreYOLO's validation pictures (matplotlib in the trainer) go with
            # the final push by default; tests/test_output.py sees them pushed.
            "args": {
                "pretrained": False,
                "workers": 0,
                "eval_interval": 1,
                "amp": False,
                "save_plots": False,
            },
        },
        "budget": {"wall_clock": "30m"},
        "preflight": {"doctor": False},
        # Two cores shared with other test processes: one OpenMP thread keeps torch from
        # spinning against them.
        "env": {"OMP_NUM_THREADS": "1"},
    }


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


SpecWriter = Callable[..., Path]


@pytest.fixture
def write_spec(tmp_path: Path) -> SpecWriter:
    def write(name: str, epochs: int = 3, **sections: Any) -> Path:
        """The base spec with `sections` merged in; a `dataset` given replaces the base's."""
        doc = base_spec(name, epochs)
        if "dataset" in sections:
            doc["dataset"] = sections.pop("dataset")
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(merge(doc, sections), sort_keys=False))
        return path

    return write


def start_run(
    spec: Path, state: Path, env: dict[str, str] | None = None, *extra: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*RUNSPEC, "run", str(spec), "--state", str(state), *extra],
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish_run(proc: subprocess.Popen[str], timeout: float = 240) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"runspec run did not end within {timeout} s:\n{out}")
    return proc.returncode, out


def record_of(state: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((state / "jobs" / name / "record.json").read_text())
    return data


def wait_record(
    state: Path, name: str, predicate: Callable[[dict[str, Any]], bool], timeout: float
) -> dict[str, Any]:
    """Poll the run's record until predicate holds; fail (never hang) after `timeout` s."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            record = record_of(state, name)
        except (OSError, ValueError):
            record = None
        if record is not None and predicate(record):
            return record
        time.sleep(0.2)
    pytest.fail(f"run {name}: condition not reached within {timeout} s")
