"""Whole runs through a real daemon process: real LibreYOLO training on a tiny synthetic
dataset, pushes to a folder, first come first served, a cancel, and re-attachment after a
SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_daemon import DaemonProc, drop, paused, wait_until

pytestmark = pytest.mark.training

TRAIN_BOUND = 400.0


def tiny(name: str, epochs: int) -> str:
    return (
        f"runspec: 1\nname: {name}\n"
        "dataset:\n  synthetic: {train: 8, val: 4, imgsz: 64, classes: 3, seed: 0}\n"
        f"train:\n  model: yolo9-t\n  epochs: {epochs}\n  batch: 4\n  imgsz: 32\n"
        "  device: cpu\n  save_period: 1\n"
        "  args: {pretrained: false, workers: 0, eval_interval: 1, patience: 0, amp: false}\n"
        "push:\n  dir: pushed\n  every: 1m\n"
        "budget:\n  wall_clock: 30m\n  hourly_cost: 3.4828\n"
        # disk: what these short runs write, whatever the test machine has free (the auto
        # estimate for 50 epochs with a checkpoint each is 2.4 GB).
        "preflight: {matmul: false, collective: false, doctor: false, disk: 600MB}\n"
        "finish:\n  action: none\n"
        # One OpenMP thread: the test machine's two cores are shared.
        "env: {OMP_NUM_THREADS: 1}\n"
    )


def _record(state: Path, name: str) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((state / "jobs" / name / "record.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return data


def _finished(state: Path, name: str) -> bool:
    return _record(state, name).get("status") == "finished"


def _training(make_daemon: Any, name: str, epochs: int) -> DaemonProc:
    """A daemon with the tiny run `name` past its first epoch."""
    daemon: DaemonProc = make_daemon()
    daemon.start()
    daemon.wait_ready()
    drop(daemon.inbox, f"{name}.yaml", tiny(name, epochs))
    wait_until(
        lambda: _record(daemon.state, name).get("epoch", 0) >= 1,
        timeout=TRAIN_BOUND,
        what="the first epoch",
    )
    return daemon


def _trainer_pid(state: Path, name: str) -> int:
    trainer = json.loads((state / "jobs" / name / "trainer.json").read_text())
    return int(trainer["identity"]["pid"])


@pytest.mark.timeout(1200)
def test_two_specs_run_one_after_the_other_and_a_cancel_stops_the_second_at_a_boundary(
    make_daemon,
) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon()
    drop(daemon.inbox, "one.yaml", tiny("one", 1))
    drop(daemon.inbox, "long.yaml", tiny("long", 50))
    daemon.start("--once")
    wait_until(
        lambda: _record(daemon.state, "long").get("epoch", 0) >= 1,
        timeout=2 * TRAIN_BOUND,
        what="the second run's first epoch",
    )
    out = subprocess.run(
        [sys.executable, "-m", "runspec", "cancel", "long", "--state", str(daemon.state)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "stops long at the next epoch boundary" in out.stdout
    assert daemon.wait(timeout=TRAIN_BOUND) == 0, daemon.output
    one, long = _record(daemon.state, "one"), _record(daemon.state, "long")
    assert one["termination"] == "completed", daemon.output
    # First come first served, one at a time: long left the queue after one ended.
    assert one["ended_at"] <= long["started_at"]
    assert one["last_push"]["final"] is True
    assert (daemon.state / "pushed" / "one" / "weights" / "last.pt").is_file()
    # The cancel: at an epoch boundary, the epoch it stopped at pushed, the finish not applied.
    assert long["termination"] == "cancelled"
    assert long["epoch"] < 50
    assert long["last_push"]["final"] is True
    assert long["last_push"]["epoch"] == long["epoch"]
    assert long["finish"] == {}  # a cancel never applies the finish
    assert (daemon.state / "pushed" / "long" / "weights" / "last.pt").is_file()
    assert "long: cancel requested; stopping at the next epoch boundary" in daemon.output
    # --once ends with each run's summary, every line naming its run.
    lines = daemon.output.splitlines()
    first = lines.index("one: summary: completed at epoch 1/1: training completed")
    summary = lines[first : first + 5]
    assert summary[2].startswith("one:   verified final push: epoch 1, ")
    assert " billed, $" in summary[3] and summary[4] == "one:   finish: none: machine left running"
    assert lines[first + 5].startswith(f"long: summary: cancelled at epoch {long['epoch']}/50")
    assert all(line.startswith("long: ") for line in lines[first + 5 :]), lines[first:]


@pytest.mark.timeout(1200)
def test_sigkill_mid_training_the_trainer_survives_and_the_run_completes(make_daemon) -> None:  # type: ignore[no-untyped-def]
    first = _training(make_daemon, "survivor", 3)
    # systemd's status line says what runs: `training survivor epoch 1/3, 29m..s left, ...`.
    status = first.notify.wait_for("STATUS=training survivor epoch ")
    assert "/3, " in status and " left" in status
    pid = _trainer_pid(first.state, "survivor")
    second: DaemonProc = make_daemon()
    attached = f"re-attached to the running trainer (pid {pid}"
    with paused(pid):
        first.signal(signal.SIGKILL)
        first.wait()
        os.kill(pid, 0)  # the trainer outlived the daemon (raises if it is gone)
        epoch_at_kill = _record(first.state, "survivor")["epoch"]
        second.start("--once")
        wait_until(lambda: attached in second.output, timeout=TRAIN_BOUND, what="the re-attach")
    assert second.wait(timeout=TRAIN_BOUND) == 0, second.output
    record = _record(second.state, "survivor")
    assert record["termination"] == "completed"
    assert record["epoch"] == 3 >= epoch_at_kill
    assert record["restarts_used"] == 0  # re-attached, not restarted
    assert record["last_push"]["final"] is True and record["last_push"]["epoch"] == 3
    pushed = second.state / "pushed" / "survivor" / "weights" / "last.pt"
    assert pushed.read_bytes() == (second.state / "runs/survivor/weights/last.pt").read_bytes()


@pytest.mark.timeout(1200)
def test_a_run_that_ended_while_no_daemon_ran_is_completed_on_restart(make_daemon) -> None:  # type: ignore[no-untyped-def]
    first = _training(make_daemon, "orphan", 3)
    pid = _trainer_pid(first.state, "orphan")
    first.signal(signal.SIGKILL)
    first.wait()

    def trainer_gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    # The trainer finishes every epoch while no daemon watches it.
    wait_until(trainer_gone, timeout=TRAIN_BOUND, what="the trainer to finish")
    second: DaemonProc = make_daemon()
    second.start("--once")
    assert second.wait(timeout=TRAIN_BOUND) == 0, second.output
    record = _record(second.state, "orphan")
    assert record["termination"] == "completed"
    assert record["epoch"] == 3  # status must not say 1/3 for a run that trained all 3
    assert record["last_push"]["final"] is True and record["last_push"]["epoch"] == 3
