"""The launcher: re-attaching to a running trainer, identity checks, the stop escalation."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from runspec.identity import ProcessIdentity
from runspec.trainer import control
from runspec.trainer.checkpoints import is_intact
from runspec.trainer.control import TrainerOutcome, TrainJob
from runspec.trainer.launcher import TrainerHandle, start
from tests.fixtures_training import TinyJob, wait_epoch, wait_for

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """An innocent process in a session of its own: it must survive every refused signal."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
    )
    yield proc
    proc.kill()
    proc.wait(timeout=10)


def test_identity_refuses_a_recycled_pid(bystander: subprocess.Popen[bytes]) -> None:
    real = ProcessIdentity.of(bystander.pid)
    assert real is not None and real.matches() and real.alive()
    # The right pid, but a process started at another time: what a recycled pid looks like.
    recycled = dataclasses.replace(real, start_ticks=real.start_ticks - 1)
    assert not recycled.matches()
    assert not recycled.signal_group(signal.SIGKILL)
    other_boot = dataclasses.replace(real, boot_id="00000000-0000-0000-0000-000000000000")
    assert not other_boot.matches()
    assert not other_boot.signal_group(signal.SIGKILL)
    assert bystander.poll() is None  # still running: nothing was sent


def test_a_handle_with_a_stale_identity_never_signals(
    tiny_job: TinyJob, bystander: subprocess.Popen[bytes]
) -> None:
    _, paths = tiny_job("stale")
    real = ProcessIdentity.of(bystander.pid)
    assert real is not None
    # trainer.json names the bystander's pid, with another start time (the trainer is long gone
    # and its pid was handed out again).
    paths.job_dir.mkdir(parents=True)
    paths.trainer_file.write_text(
        json.dumps(
            {
                "identity": {**real.to_json(), "start_ticks": real.start_ticks + 7},
                "unit": None,
                "control_dir": str(paths.control_dir),
                "run_dir": str(paths.run_dir),
                "started_at": 0.0,
            }
        )
    )
    lines: list[str] = []
    handle = TrainerHandle.load(paths, log_line=lines.append)
    assert handle is not None
    assert not handle.alive()
    handle.kill_now()
    handle.stop(grace_s=0)
    assert bystander.poll() is None
    assert any("is not our trainer" in line for line in lines)
    result = handle.result()
    assert result is not None and result.outcome == TrainerOutcome.KILLED


def test_a_reloaded_handle_finds_the_running_trainer_and_stops_it(tiny_job: TinyJob) -> None:
    job, paths = tiny_job("reattach", epochs=30)
    first = start(job, paths)
    wait_epoch(paths, 1)
    # What a restarted daemon does: nothing in memory, only trainer.json.
    lines: list[str] = []
    second = TrainerHandle.load(paths, log_line=lines.append)
    assert second is not None and second._proc is None
    assert second.identity == first.identity
    assert second.alive()
    assert TrainJob.read(paths.job_dir / "train_job.json") == job
    second.stop(grace_s=300, reason="daemon says stop")
    assert not second.alive() and not first.alive()
    result = second.result()
    assert result is not None and result.outcome == TrainerOutcome.STOPPED, result
    assert result.reason == "daemon says stop"
    assert "trainer stopped at an epoch boundary" in lines
    assert is_intact(paths.run_dir / "weights" / "last.pt")
    first._proc.wait(timeout=10)  # type: ignore[union-attr]


def test_stop_escalates_to_sigterm_when_the_boundary_does_not_come(tiny_job: TinyJob) -> None:
    # A grace of zero stands for an epoch too long to wait for: the request is written, then a
    # SIGTERM with a stop pending ends the trainer at once, mid-epoch.
    job, paths = tiny_job("escalate", epochs=30)
    lines: list[str] = []
    handle = start(job, paths, log_line=lines.append)
    wait_for((paths.run_dir / "status.json").exists, 300, "training to start")
    handle.stop(grace_s=0, reason="no time left")
    assert not handle.alive()
    assert any("SIGTERM" in line for line in lines)
    result = handle.result()
    assert result is not None and result.outcome == TrainerOutcome.KILLED
    assert result.exit_code == control.EXIT_SECOND_SIGNAL
    # LibreYOLO never got to say so: status.json still says running; the result knows better.
    assert '"running"' in (paths.run_dir / "status.json").read_text()
