"""A trainer that stops making progress: the lifecycle notices, and ends it in the right way.

SIGSTOP freezes the real trainer process mid-run, which is what a hang looks like from the
outside (a stuck NCCL collective, a wedged dataloader): alive, but no new epoch. The lifecycle
runs in-process here so the bounds (normally ten minutes and more) can be shrunk.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
from pathlib import Path

import pytest

from runspec.run.accept import accept
from runspec.run.lifecycle import Lifecycle, LifecycleOptions
from runspec.spec.loader import load_spec
from runspec.store.paths import RunPaths
from runspec.store.state import RecordStore, RunRecord
from runspec.trainer.checkpoints import newest_intact_checkpoint
from tests.fixtures_run import SpecWriter, wait_record

pytestmark = pytest.mark.training


def start_lifecycle(
    spec_file: Path, state: Path, lines: list[str], **options: float
) -> tuple[Lifecycle, threading.Thread, list[RunRecord]]:
    spec = load_spec(spec_file)
    accept(spec, state)
    lifecycle = Lifecycle(
        spec,
        RunPaths.for_spec(spec, state),
        RecordStore(state),
        LifecycleOptions(
            progress=lines.append,
            tick=0.2,
            **options,  # type: ignore[arg-type]
        ),
    )
    done: list[RunRecord] = []
    thread = threading.Thread(target=lambda: done.append(lifecycle.run()), daemon=True)
    thread.start()
    return lifecycle, thread, done


def freeze_trainer(state: Path, name: str) -> int:
    pid: int = json.loads((state / "jobs" / name / "trainer.json").read_text())["identity"]["pid"]
    os.kill(pid, signal.SIGSTOP)
    return pid


def finished(thread: threading.Thread, done: list[RunRecord], lines: list[str]) -> RunRecord:
    thread.join(timeout=240)
    assert not thread.is_alive() and done, "\n".join(lines)
    return done[0]


def test_a_hung_trainer_is_ended_and_the_run_resumed(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state, lines = tmp_path / "state", list[str]()
    spec = write_spec("hung", epochs=5, push={"dir": str(tmp_path / "volume")})
    _, thread, done = start_lifecycle(spec, state, lines, hang_floor=3.0, first_epoch_hang=120.0)
    wait_record(state, "hung", lambda r: r["epoch"] >= 2, timeout=180)
    frozen = freeze_trainer(state, "hung")
    record = finished(thread, done, lines)
    assert record.termination is not None and record.termination.value == "completed", lines
    assert record.restarts_used == 1
    assert any("no progress" in line for line in lines)
    with pytest.raises(ProcessLookupError):
        os.kill(frozen, 0)  # the frozen trainer is gone, not left behind
    assert record.last_push is not None and record.last_push.epoch == 5


def test_an_epoch_past_the_point_of_no_return_is_cut_and_the_staged_checkpoint_pushed(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state, lines = tmp_path / "state", list[str]()
    spec = write_spec(
        "cut",
        epochs=100,
        train={"save_period": 1},
        preflight={"disk": "600MB"},  # the budget ends it; never ask for 4.6 GB
        push={"dir": str(tmp_path / "volume")},
        budget={"wall_clock": "55s", "reserve": "15s"},
    )
    _, thread, done = start_lifecycle(spec, state, lines, hang_floor=600.0)
    wait_record(state, "cut", lambda r: r["epoch"] >= 1, timeout=180)
    freeze_trainer(state, "cut")  # the epoch in progress never ends on its own
    record = finished(thread, done, lines)
    assert record.termination is not None and record.termination.value == "budget"
    assert any("point" in line or "reserve" in line for line in lines), lines
    assert record.last_push is not None and record.last_push.final
    # What went out is the newest complete checkpoint, whole. (With sub-second epochs the cut
    # can land while last.pt is being rewritten: then it is epoch_N.pt.)
    run_dir = state / "runs" / "cut"
    newest = newest_intact_checkpoint(run_dir)
    assert newest is not None
    pushed = tmp_path / "volume" / "cut" / newest.relative_to(run_dir)
    digest = hashlib.sha256(pushed.read_bytes()).hexdigest()
    assert digest == hashlib.sha256(newest.read_bytes()).hexdigest()
    assert record.ended_at is not None and record.deadline is not None
    assert record.ended_at <= record.deadline


def test_a_cancel_the_trainer_never_answers_is_bounded(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state, lines = tmp_path / "state", list[str]()
    spec = write_spec("deaf", epochs=100, preflight={"disk": "600MB"})
    lifecycle, thread, done = start_lifecycle(spec, state, lines, stop_grace=3.0, hang_floor=600.0)
    wait_record(state, "deaf", lambda r: r["epoch"] >= 1, timeout=180)
    freeze_trainer(state, "deaf")
    lifecycle.requests.cancel()
    record = finished(thread, done, lines)
    assert record.termination is not None and record.termination.value == "cancelled"
    assert any("did not reach an epoch boundary" in line for line in lines), lines
