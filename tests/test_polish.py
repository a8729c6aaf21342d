"""Issue 23's polish, each through the command a person types where there is one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from runspec.store.owner import daemon_holder
from runspec.store.paths import StateLayout
from runspec.views.report import summary_weights

RUNSPEC = [sys.executable, "-m", "runspec"]


def _runspec(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNSPEC, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_runspec_alone_prints_the_help() -> None:
    out = _runspec()
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: runspec") and "COMMAND" in out.stdout
    assert "the following arguments are required" not in out.stderr


def test_cuda_n_is_a_device_and_a_bare_duration_suggests_minutes(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    body = "runspec: 1\nname: dev\ndataset: {synthetic: {}}\n"
    spec.write_text(body + "train: {model: yolo9-t, epochs: 3, device: cuda:1}\n"
                    "budget: {wall_clock: 10m}\n")  # fmt: skip
    ok = _runspec("validate", str(spec))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    spec.write_text(body + "train: {model: yolo9-t, epochs: 3}\nbudget: {wall_clock: 90}\n")
    bare = _runspec("validate", str(spec))
    assert bare.returncode == 1
    assert "90 has no unit: write 90m, 90h or 90s" in bare.stdout + bare.stderr


def test_checkpoints_are_listed_in_natural_order() -> None:
    files = ["weights/epoch_10.pt", "weights/last.pt", "weights/epoch_2.pt", "weights/best.pt"]
    assert summary_weights(files) == " (best.pt, epoch_2.pt, epoch_10.pt, last.pt)"
    # A name the trainer chose whose digits int() refuses (a superscript, a circled digit)
    # sorts as text: it never crashes the summary.
    odd = ["weights/1²", "weights/①.pt", "weights/epoch_3.pt"]
    assert summary_weights(odd) == " (1², epoch_3.pt, ①.pt)"


def test_install_refuses_a_root_that_is_not_there_and_names_the_next_command(
    tmp_path: Path,
) -> None:
    missing = _runspec("install", "--root", str(tmp_path / "no-such-root"))
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "is not a folder" in missing.stderr
    assert not (tmp_path / "no-such-root").exists()
    runspec = Path(sys.executable).with_name("runspec")
    done = _runspec("install", "--root", str(tmp_path), "--exec", str(runspec))
    assert done.returncode == 0, done.stderr
    assert f"next: systemctl --root={tmp_path} enable runspecd" in done.stdout


def test_daemon_detach_twice_says_already_running_and_stop_ends_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    config = tmp_path / "runspecd.yaml"
    config.write_text("# defaults\n")
    config.chmod(0o600)
    common = ("--state", str(state), "--config", str(config))
    first = _runspec("daemon", "--detach", *common)
    try:
        assert first.returncode == 0, first.stdout + first.stderr
        pid = int(first.stdout.split("pid ")[1].split(",")[0])
        assert f"stop it with: runspec daemon --stop --state {state}" in first.stdout
        again = _runspec("daemon", "--detach", *common)
        assert again.returncode == 0, again.stderr
        assert f"runspecd already running (pid {pid})" in again.stdout
        stopped = _runspec("daemon", "--stop", *common)
        assert stopped.returncode == 0, stopped.stderr
        assert f"runspecd (pid {pid}) stopped" in stopped.stdout
        assert _runspec("daemon", "--stop", *common).stdout.startswith("no runspecd runs on")
    finally:
        holder = daemon_holder(StateLayout(state))
        if holder is not None:
            os.kill(holder.pid, signal.SIGKILL)
