"""Fixtures for the pusher: a run folder that looks like a LibreYOLO run mid-training.

Checkpoints here are fake but valid torch archives (zip files with a `data.pkl` member, which
is what `runspec.trainer.checkpoints.is_intact` checks), big enough (12 MB) to take the Hub's LFS
path; the trainer's epoch marker vouches for them exactly as the real trainer's does. One test
file (test_push_training.py) pushes real checkpoints from real training instead.
"""

from __future__ import annotations

import os
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from runspec.clock import ManualClock
from runspec.push import Pusher
from runspec.run.accept import accept
from runspec.spec.loader import load_spec
from runspec.spec.model import Spec
from runspec.store.owner import RunOwner
from runspec.store.paths import RunPaths
from runspec.store.state import RecordStore, RunRecord
from runspec.timers import Ticker, Timers
from runspec.trainer.control import EpochMarker, FileStat, write_epoch_marker

CKPT_SIZE = 12 * 1000 * 1000

SPEC = """\
runspec: 1
name: {name}
dataset:
  synthetic: {{train: 8, val: 4, imgsz: 64, classes: 3, seed: 0}}
train:
  model: yolo9-t
  epochs: 10
  batch: 4
  imgsz: 64
  device: cpu
  save_period: 2
  args: {{pretrained: false, workers: 0}}
push:
{target}
  every: {every}
budget:
  wall_clock: 1h
"""


def write_checkpoint(path: Path, epoch: int, size: int = CKPT_SIZE) -> None:
    """A fake but intact torch checkpoint: a zip with data.pkl and a random tensor blob."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", f"epoch {epoch}".encode())
        archive.writestr("archive/data/0", os.urandom(size))


@dataclass
class FakeRun:
    spec: Spec
    paths: RunPaths
    store: RecordStore
    record: RunRecord
    clock: ManualClock
    lines: list[str] = field(default_factory=list)
    pushers: list[Pusher] = field(default_factory=list)
    tickers: list[Ticker] = field(default_factory=list)

    @property
    def run_dir(self) -> Path:
        return self.paths.run_dir

    def epoch(self, n: int, best: bool = True, total: int = 10, size: int = CKPT_SIZE) -> None:
        """What LibreYOLO and the trainer leave at the end of epoch n (save_period 2)."""
        weights = self.run_dir / "weights"
        write_checkpoint(weights / "last.pt", n, size)
        if best:
            write_checkpoint(weights / "best.pt", n, size)
        if n % 2 == 0:
            write_checkpoint(weights / f"epoch_{n}.pt", n, size)
        with (self.run_dir / "metrics.jsonl").open("a") as fh:
            fh.write(f'{{"epoch": {n}, "loss": {1.0 / n}}}\n')
        (self.run_dir / "status.json").write_text(
            f'{{"state": "running", "completed_epochs": {n}}}'
        )
        with (self.run_dir / "train.log").open("a") as fh:
            fh.write(f"epoch {n} done\n")
        files = {
            p.relative_to(self.run_dir).as_posix(): FileStat.of(p) for p in weights.glob("*.pt")
        }
        write_epoch_marker(
            self.paths.control_dir,
            EpochMarker(
                epoch=n,
                total_epochs=total,
                epoch_seconds=1.0,
                validated=True,
                time=time.time(),
                files=files,
            ),
        )

    def pusher(self, **kwargs: Any) -> Pusher:
        options: dict[str, Any] = {
            "clock": self.clock,
            "progress": self.lines.append,
            "min_interval": 0.0,
            # A push that fails on a loaded machine is retried at once; tests of the backoff
            # set their own.
            "retry_base": 0.0,
        }
        options.update(kwargs)
        if "timers" not in options:
            # As `runspec run` drives a run: its own scheduler, run by a ticker thread
            # (runspec.run.driver); a test passing `timers` runs them itself, as the daemon does.
            ticker = Ticker(Timers(self.clock)).start()
            self.tickers.append(ticker)
            options["timers"] = ticker.timers
        pusher = Pusher(self.spec, self.paths, RunOwner(self.store, self.record), **options)
        pusher.start()
        self.pushers.append(pusher)
        return pusher

    def reload(self) -> RunRecord:
        record = self.store.load(self.spec.name)
        assert record is not None
        return record


MakeRun = Callable[..., FakeRun]


def wait_until(
    predicate: Callable[[], object], timeout: float, what: str, run: FakeRun | None = None
) -> None:
    """Poll until predicate() holds; fail the test (never hang) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            said = "\n".join(run.lines) if run is not None else ""
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{said}")
        time.sleep(0.05)


@pytest.fixture
def make_run(tmp_path: Path) -> Iterator[MakeRun]:
    runs: list[FakeRun] = []

    def build(
        target: str = "hub", name: str = "run1", every: str = "1h", verify: str = "metadata"
    ) -> FakeRun:
        state = tmp_path / "state"
        lines = {
            "hub": f"  hub: {{repo: me/{name}, private: true}}",
            "dir": "  dir: pushed",
        }
        spec_file = tmp_path / f"{name}.yaml"
        target_lines = f"{lines[target]}\n  verify: {verify}"
        spec_file.write_text(SPEC.format(name=name, target=target_lines, every=every))
        spec = load_spec(spec_file)
        clock = ManualClock()
        # As `runspec submit` records it on the machine: what may leave it is chosen at push.
        submitted = {
            "via": "runspec submit",
            "source_path": f"/home/ada/specs/{name}.yaml",
            "submitted_by": "ada",
            "host": "ada-laptop",
            "spec_dir": "/home/ada/specs",
        }
        record = accept(spec, state, provenance=submitted, clock=clock)
        store = RecordStore(state, clock)
        paths = RunPaths.for_spec(spec, state)
        paths.run_dir.mkdir(parents=True, exist_ok=True)
        (paths.run_dir / "train_config.yaml").write_text("epochs: 10\n")
        run = FakeRun(spec, paths, store, record, clock)
        runs.append(run)
        return run

    yield build
    for run in runs:
        for pusher in run.pushers:
            pusher.stop()
        for ticker in run.tickers:
            ticker.stop()
