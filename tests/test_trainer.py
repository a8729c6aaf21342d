"""The trainer program, run for real (yolo9-t from scratch, CPU) through the launcher.

Each test is one or two real training processes; assertions share a run where they look at
the same outcome from different sides (result, observer, checkpoints).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from pathlib import Path

import pytest

from runspec.store.paths import RunPaths
from runspec.trainer import control
from runspec.trainer.checkpoints import complete_checkpoints, is_intact, newest_intact_checkpoint
from runspec.trainer.control import TrainerOutcome
from runspec.trainer.launcher import TrainerHandle, start
from runspec.trainer.observer import observe
from tests.fixtures_training import TinyJob, wait_epoch, wait_for

pytestmark = pytest.mark.timeout(600)


def _finish(handle: TrainerHandle, timeout: float = 300.0) -> None:
    wait_for(lambda: not handle.alive(), timeout, "the trainer to exit")


def _cut(path: Path) -> None:
    with path.open("r+b") as fh:
        fh.truncate(path.stat().st_size // 3)


def _assert_stopped_at_boundary(paths: RunPaths, handle: TrainerHandle, asked_after: int) -> str:
    _finish(handle)
    result = handle.result()
    assert result is not None and result.outcome == TrainerOutcome.STOPPED, result
    assert result.exit_code == control.EXIT_STOPPED
    marker = control.read_epoch_marker(paths.control_dir)
    assert marker is not None
    # Stopped at the boundary after the request: one epoch later at most, far from 30.
    assert asked_after <= marker.epoch <= asked_after + 1 < marker.total_epochs == 30
    last = paths.run_dir / "weights" / "last.pt"
    assert is_intact(last)
    complete = {c.relpath: c.epoch for c in complete_checkpoints(paths.run_dir, paths.control_dir)}
    assert complete["weights/last.pt"] == marker.epoch
    seen = observe(paths.run_dir, paths.control_dir)
    assert seen.completed_epochs == marker.epoch
    return result.reason


def test_a_stop_request_stops_at_the_next_epoch_boundary(tiny_job: TinyJob) -> None:
    job, paths = tiny_job("stop", epochs=30)
    handle = start(job, paths)
    wait_epoch(paths, 1)
    handle.request_stop("cancelled by the test")
    reason = _assert_stopped_at_boundary(paths, handle, asked_after=1)
    assert reason == "cancelled by the test"


def test_sigterm_to_the_trainer_stops_at_the_boundary(tiny_job: TinyJob) -> None:
    job, paths = tiny_job("sigterm", epochs=30)
    handle = start(job, paths)
    wait_epoch(paths, 1)
    os.kill(handle.identity.pid, signal.SIGTERM)
    reason = _assert_stopped_at_boundary(paths, handle, asked_after=1)
    assert reason == "SIGTERM to the trainer"


def test_the_deadline_stops_the_trainer_by_itself(tiny_job: TinyJob) -> None:
    job, paths = tiny_job("deadline", epochs=30)
    # Already too close for one more epoch: the trainer must stop after its first one, with
    # nobody asking.
    control.write_deadline(paths.control_dir, time.time() + 0.5)
    handle = start(job, paths)
    _finish(handle)
    result = handle.result()
    assert result is not None and result.outcome == TrainerOutcome.STOPPED
    assert result.reason == "deadline"
    assert "stopped after epoch 1" in result.detail
    assert result.epochs_completed == 1
    assert is_intact(paths.run_dir / "weights" / "last.pt")


def test_a_killed_trainer_is_detected_and_resumes_to_completion(tiny_job: TinyJob) -> None:
    job, paths = tiny_job("killed", epochs=4)
    handle = start(job, paths)
    wait_epoch(paths, 2)
    os.kill(handle.identity.pid, signal.SIGKILL)
    _finish(handle, 30)

    assert not handle.alive()
    assert control.read_result(paths.control_dir) is None
    result = handle.result()
    assert result is not None and result.outcome == TrainerOutcome.KILLED
    assert "SIGKILL" in result.reason

    resume_from = newest_intact_checkpoint(paths.run_dir)
    assert resume_from is not None
    resumed_job, _ = tiny_job("killed", epochs=4, resume_from=resume_from)
    assert resumed_job.run_dir == job.run_dir
    second = start(resumed_job, paths)
    _finish(second)
    result = second.result()
    assert result is not None and result.outcome == TrainerOutcome.COMPLETED, result
    seen = observe(paths.run_dir, paths.control_dir)
    assert [row["epoch"] for row in seen.epochs] == [1, 2, 3, 4]  # deduplicated after resume
    assert is_intact(paths.run_dir / "weights" / "epoch_4.pt")
    assert "Resumed from epoch" in (paths.run_dir / "console.log").read_text()


def test_a_libreyolo_error_fails_with_its_type_and_message(tiny_job: TinyJob) -> None:
    job, paths = tiny_job("broken", epochs=2)
    bad = dataclasses.replace(job, data=str(paths.state / "no-such-data.yaml"))
    handle = start(bad, paths)
    _finish(handle)
    result = handle.result()
    assert result is not None and result.outcome == TrainerOutcome.FAILED
    assert result.exit_code == control.EXIT_FAILED
    assert result.error_type and "no-such-data.yaml" in result.error_message


def test_a_resumed_auto_batch_run_keeps_the_batch_autobatch_picked(tiny_job: TinyJob) -> None:
    from runspec.trainer.child import StopControl, train_kwargs

    job, paths = tiny_job("auto", epochs=4)
    job = dataclasses.replace(job, batch=-1)
    callback = StopControl(job.control_dir)
    assert train_kwargs(job, "0", callback)["batch"] == -1  # a new run: AutoBatch picks
    resumed = dataclasses.replace(job, resume_from=str(paths.run_dir / "weights" / "last.pt"))
    assert train_kwargs(resumed, "0", callback)["batch"] == -1  # nothing recorded yet
    paths.run_dir.mkdir(parents=True)
    # What LibreYOLO wrote before the first epoch, AutoBatch already resolved.
    (paths.run_dir / "train_config.yaml").write_text("epochs: 4\nbatch: 256\nimgsz: 640\n")
    kwargs = train_kwargs(resumed, "0", callback)
    assert kwargs["batch"] == 256 and kwargs["resume"] is True
    assert train_kwargs(job, "0", callback)["batch"] == -1  # only a resume reuses it
    fixed = dataclasses.replace(resumed, batch=8)
    assert train_kwargs(fixed, "0", callback)["batch"] == 8  # a given batch is the spec's


def test_a_clean_run_completes_and_a_resume_from_its_every_epoch_completes_and_vouches_for_it(
    tiny_job: TinyJob,
) -> None:
    """A clean run; then, as though the trainer had saved the last epoch's last.pt and died
    before its marker (a full disk, a kill), a resume from it: LibreYOLO refuses to resume a
    run with nothing left to train, so that resume used to fail the run. Now it completes, and
    the marker vouches for the weights to push. Last, a cut last.pt is never complete."""
    job, paths = tiny_job("clean", epochs=2)
    handle = start(job, paths)
    _finish(handle)

    result = handle.result()
    assert result is not None and result.outcome == TrainerOutcome.COMPLETED
    assert result.exit_code == control.EXIT_COMPLETED == handle._proc.returncode  # type: ignore[union-attr]
    assert result.epochs_completed == 2
    seen = observe(paths.run_dir, paths.control_dir)
    assert (seen.completed_epochs, seen.total_epochs) == (2, 2)
    assert [row["epoch"] for row in seen.epochs] == [1, 2]
    assert seen.train_loss is not None and seen.best_metric_name
    complete = {c.relpath: c.epoch for c in complete_checkpoints(paths.run_dir, paths.control_dir)}
    assert complete["weights/last.pt"] == 2 and complete["weights/epoch_2.pt"] == 2
    assert (paths.run_dir / "console.log").read_text().strip()  # the trainer's output went there

    marker = control.read_epoch_marker(paths.control_dir)
    assert marker is not None and marker.epoch == 2
    # As the trainer that died left it: the marker still says epoch 1 and vouches for nothing.
    control.write_epoch_marker(paths.control_dir, dataclasses.replace(marker, epoch=1, files={}))
    assert complete_checkpoints(paths.run_dir, paths.control_dir) == []

    last = paths.run_dir / "weights" / "last.pt"
    resumed_job, _ = tiny_job("clean", epochs=2, resume_from=last)
    second = start(resumed_job, paths)
    _finish(second)
    result = second.result()
    assert result is not None and result.outcome == TrainerOutcome.COMPLETED, result
    assert result.epochs_completed == 2
    complete = {c.relpath: c.epoch for c in complete_checkpoints(paths.run_dir, paths.control_dir)}
    assert complete["weights/last.pt"] == 2

    # A last.pt cut short (as a SIGTERM mid-save leaves it) is never offered as complete.
    _cut(last)
    complete_now = {c.relpath for c in complete_checkpoints(paths.run_dir, paths.control_dir)}
    assert "weights/last.pt" not in complete_now and "weights/epoch_2.pt" in complete_now
    assert newest_intact_checkpoint(paths.run_dir) == paths.run_dir / "weights" / "epoch_2.pt"
