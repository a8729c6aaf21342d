"""The epoch a trainer ends on is the run's epoch, even when it exits between two reads.

The lifecycle reads the trainer's epoch marker once a tick. A trainer that writes its last
marker and exits inside one tick (a cancel at the boundary, the last epoch, a full disk)
used to leave the record one epoch short of the checkpoint pushed for it. Here the tick is
stretched to the trainer's whole life: the watch reads once before the first epoch and next
after the trainer is gone, so only a read after the exit can tell the run its epochs.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psutil
import pytest

from runspec.clock import Clock
from runspec.run.accept import accept
from runspec.run.lifecycle import Lifecycle, LifecycleOptions
from runspec.spec.loader import load_spec
from runspec.store.paths import RunPaths
from runspec.store.state import RecordStore, RunRecord
from runspec.trainer.launcher import TrainerHandle
from tests.fixtures_run import SpecWriter

pytestmark = pytest.mark.training

TICK = 10_000.0  # longer than the run: the watch loop sleeps through all of training


class SleepsThroughTraining(Clock):
    """The real clock, except that a tick's sleep ends when the trainer has exited."""

    def __init__(self, paths: RunPaths) -> None:
        self.paths = paths

    def sleep(self, seconds: float) -> None:
        if seconds < TICK:
            super().sleep(seconds)
            return
        end = time.monotonic() + 300
        while time.monotonic() < end:
            handle = TrainerHandle.find(self.paths)
            if handle is not None and not _running(handle.identity.pid):
                return
            time.sleep(0.1)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_the_epoch_the_trainer_exits_on_is_the_runs_epoch(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state, lines = tmp_path / "state", list[str]()
    spec = load_spec(write_spec("brisk", epochs=2, push={"dir": str(tmp_path / "volume")}))
    accept(spec, state)
    paths = RunPaths.for_spec(spec, state)
    lifecycle = Lifecycle(
        spec,
        paths,
        RecordStore(state),
        LifecycleOptions(progress=lines.append, tick=TICK),
        clock=SleepsThroughTraining(paths),
    )
    done: list[RunRecord] = []
    thread = threading.Thread(target=lambda: done.append(lifecycle.run()), daemon=True)
    thread.start()
    thread.join(timeout=300)
    assert not thread.is_alive() and done, "\n".join(lines)
    record = done[0]
    assert record.termination is not None and record.termination.value == "completed", lines
    assert record.last_push is not None and record.last_push.final
    assert record.epoch == 2 == record.last_push.epoch, lines
    assert any(line.startswith("epoch 2/2") for line in lines), lines
