"""One run, one owner, through real processes: a second `runspec run` of the same spec is
refused at once naming the first, a daemon on the same state folder leaves the run to it, a
lost trainer.json never starts a second trainer, and the config's `runs:` folder is the one
the name guard checks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_daemon import DaemonProc, drop, paused, spec_text, trainer_pid, wait_until
from tests.fixtures_run import SpecWriter, finish_run, record_of, start_run, wait_record

TRAIN_BOUND = 400.0


@pytest.mark.training
@pytest.mark.timeout(900)
def test_a_second_driver_is_refused_and_the_finish_runs_once(
    tmp_path: Path, write_spec: SpecWriter, make_daemon: Any
) -> None:
    ran = tmp_path / "finish-ran"
    spec = write_spec(
        "owned",
        epochs=2,
        push={"dir": str(tmp_path / "volume")},
        finish={"action": "command", "command": ["sh", "-c", f"echo ran >> {ran}"]},
    )
    state = tmp_path / "state"
    first = start_run(spec, state)
    wait_record(state, "owned", lambda r: r.get("epoch", 0) >= 1, TRAIN_BOUND)

    # The trainer held still meanwhile: the run is surely under way while the others try.
    daemon: DaemonProc = make_daemon(state=state)
    with paused(trainer_pid(state, "owned")):
        second = subprocess.run(
            [sys.executable, "-m", "runspec", "run", str(spec), "--state", str(state)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"run 'owned' is already driven by pid {first.pid} (runspec run" in second.stderr
        assert "runspec cancel owned" in second.stderr

        # A daemon on the same state folder sees the run driven elsewhere and leaves it alone.
        daemon.start()
        daemon.wait_ready()
        wait_until(lambda: f"owned: driven by pid {first.pid}" in daemon.output, what="the refusal")

    code, out = finish_run(first)
    assert code == 0, out
    assert record_of(state, "owned")["termination"] == "completed"
    assert ran.read_text() == "ran\n"  # the finish ran once, by its one owner
    assert "resuming owned" not in daemon.output and "starting owned" not in daemon.output


@pytest.mark.training
@pytest.mark.timeout(900)
def test_a_lost_trainer_json_never_starts_a_second_trainer(make_daemon: Any) -> None:
    first: DaemonProc = make_daemon()
    first.start()
    first.wait_ready()
    text = spec_text("lost", data_path="/unused").replace(
        "dataset:\n  path: /unused\n",
        "dataset:\n  synthetic: {train: 8, val: 4, imgsz: 64, classes: 3, seed: 0}\n",
    )
    text = text.replace("epochs: 2", "epochs: 3").replace("  args:", "  save_period: 1\n  args:")
    drop(first.inbox, "lost.yaml", text + "env: {OMP_NUM_THREADS: 1}\n")
    job = first.state / "jobs" / "lost"
    wait_until(lambda: (first.record("lost") or {}).get("epoch", 0) >= 1, timeout=TRAIN_BOUND)
    trainer_file = job / "trainer.json"
    pid = int(json.loads(trainer_file.read_text())["identity"]["pid"])
    second: DaemonProc = make_daemon()
    # The trainer held still until the next daemon has found it: it outlives the first.
    with paused(pid):
        trainer_file.unlink()
        first.signal(signal.SIGKILL)
        first.wait()
        os.kill(pid, 0)  # the trainer lives on
        second.start("--once")
        wait_until(
            lambda: f"re-attached to the running trainer (pid {pid})" in second.output,
            timeout=TRAIN_BOUND,
            what="the re-attach",
        )
    assert second.wait(timeout=TRAIN_BOUND) == 0, second.output
    assert "found the run's live trainer by " in second.output
    record = second.record("lost")
    assert record is not None and record["termination"] == "completed"
    assert record["restarts_used"] == 0 and record["epoch"] == 3
    started = (first.output + second.output).count("epochs (trainer pid")
    assert started == 1, "a second trainer was started"
    console = (second.state / "runs" / "lost" / "console.log").read_text()
    assert console.count("runspec.trainer: completed") == 1


def test_the_configs_runs_folder_is_the_one_the_name_guard_checks(
    make_daemon: Any, tmp_path: Path
) -> None:
    runs = tmp_path / "elsewhere" / "runs"
    (runs / "taken" / "weights").mkdir(parents=True)
    (runs / "taken" / "weights" / "last.pt").write_bytes(b"another run's weights")
    config = tmp_path / "runspecd.yaml"
    config.write_text(f"runs: {runs}\n")
    os.chmod(config, 0o600)
    daemon: DaemonProc = make_daemon(config=config)
    drop(daemon.inbox, "taken.yaml", spec_text("taken"))
    drop(daemon.inbox, "fresh.yaml", spec_text("fresh"))
    daemon.start("--once")
    assert daemon.wait() == 0, daemon.output
    error = daemon.inbox / "rejected" / "taken.yaml.error"
    assert f"{runs / 'taken'} already holds another run's files" in error.read_text()
    assert (runs / "taken" / "weights" / "last.pt").read_bytes() == b"another run's weights"
    status = subprocess.run(
        [
            sys.executable,
            "-m",
            "runspec",
            "status",
            "fresh",
            "--json",
            "--state",
            str(daemon.state),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert status.returncode == 0, status.stderr
    assert f'"run_dir": "{runs / "fresh"}"' in status.stdout
