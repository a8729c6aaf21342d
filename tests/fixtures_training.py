"""Training fixtures: one synthetic dataset per session, and tiny yolo9-t specs and jobs.

Every run here is real LibreYOLO training of yolo9-t from scratch (no download) at imgsz 32 on
8 images, `workers: 0`: a second or less per epoch on 2 CPU cores, ~6 s of import and build.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from runspec.dataset.synthetic import generate
from runspec.spec.model import BudgetSpec, DatasetSpec, Spec, SyntheticDataset, TrainSpec
from runspec.store.paths import RunPaths
from runspec.trainer.control import TrainJob, read_epoch_marker

TINY = SyntheticDataset(train=8, val=4, imgsz=64, classes=3, seed=0)


@pytest.fixture(scope="session")
def synthetic_data_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny synthetic dataset, generated once for the whole session."""
    return generate(tmp_path_factory.mktemp("synthetic") / "data", TINY)


def tiny_spec(name: str, epochs: int = 3, **train_args: Any) -> Spec:
    """A spec for yolo9-t from scratch at imgsz 32, batch 4, CPU, a checkpoint every epoch."""
    args: dict[str, Any] = {
        "pretrained": False,
        "workers": 0,
        "eval_interval": 1,
        "patience": 0,
        "amp": False,
    }
    args.update(train_args)
    return Spec(
        name=name,
        dataset=DatasetSpec(synthetic=TINY),
        train=TrainSpec(
            model="yolo9-t",
            epochs=epochs,
            batch=4,
            imgsz=32,
            device="cpu",
            save_period=1,
            restarts=2,
            args=MappingProxyType(args),
        ),
        budget=BudgetSpec(wall_clock=3600.0),
        # Two cores shared with other test processes: one OpenMP thread per trainer keeps torch
        # from spinning against them (measured: 12 s instead of 100 s for the same run).
        env=MappingProxyType({"OMP_NUM_THREADS": "1"}),
    )


TinyJob = Callable[..., tuple[TrainJob, RunPaths]]


@pytest.fixture
def tiny_job(tmp_path: Path, synthetic_data_yaml: Path) -> TinyJob:
    """Build (TrainJob, RunPaths) for a tiny run under this test's state folder."""

    def build(
        name: str = "tiny", epochs: int = 3, resume_from: Path | None = None, **train_args: Any
    ) -> tuple[TrainJob, RunPaths]:
        spec = tiny_spec(name, epochs, **train_args)
        paths = RunPaths.for_spec(spec, tmp_path / "state")
        return TrainJob.from_spec(spec, paths, synthetic_data_yaml, resume_from=resume_from), paths

    return build


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """Poll until predicate() is true; fail the test (never hang) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


def wait_epoch(paths: RunPaths, epoch: int, timeout: float = 300.0) -> None:
    """Wait until the trainer's epoch marker reaches `epoch`."""

    def reached() -> bool:
        marker = read_epoch_marker(paths.control_dir)
        return marker is not None and marker.epoch >= epoch

    wait_for(reached, timeout, f"epoch {epoch}")
