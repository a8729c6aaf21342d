"""The daemon as systemd sees it: readiness, watchdog, STATUS=, signals, lock, permissions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_daemon import DaemonProc, drop, spec_text, wait_until


def test_ready_watchdog_and_status_over_the_notify_socket(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start(watchdog_usec=400_000)
    ready = daemon.wait_ready()
    assert "STATUS=idle" in ready
    # Pings come from the main loop, about every WATCHDOG_USEC/2.
    daemon.notify.messages.clear()
    wait_until(lambda: daemon.notify.drain().count("WATCHDOG=1") >= 3, what="three pings")
    assert daemon.stop() == 0
    assert any("STOPPING=1" in m for m in daemon.notify.drain())


def test_daemon_never_imports_torch(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    assert daemon.proc is not None
    maps = Path(f"/proc/{daemon.proc.pid}/maps").read_text()
    assert "libtorch" not in maps
    assert "torch" not in {
        Path(line.split()[-1]).parts[-2]
        for line in maps.splitlines()
        if "/" in line and len(Path(line.split()[-1]).parts) > 1
    }


# What a run or the machine's end needs, and an idle daemon never loads: the idle RSS goal
# (40 MB, bench/bench_daemon.py) holds because these wait for the first run.
RUN_MACHINERY = (
    "runspec.run.lifecycle",
    "runspec.machine.endgame",
    "runspec.push.pusher",
    "runspec.dataset.staging",
    "urllib.request",
    "psutil",
)


def test_an_idle_daemon_loads_no_run_machinery(tmp_path: Path) -> None:
    state, inbox = tmp_path / "state", tmp_path / "inbox"
    state.mkdir(mode=0o700)
    inbox.mkdir(mode=0o700)
    config = tmp_path / "runspecd.yaml"
    config.write_text("# the defaults\n")
    argv = [
        "daemon",
        "--once",
        "--state",
        str(state),
        "--inbox",
        str(inbox),
        "--config",
        str(config),
    ]
    probe = (
        "import sys\n"
        "from runspec.cli import main\n"
        f"code = main({argv!r})\n"
        f"print(code, sorted(m for m in {RUN_MACHINERY!r} if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.stdout.strip().splitlines()[-1] == "0 []", (result.stdout, result.stderr)


def test_world_writable_inbox_is_refused_with_the_fix(make_daemon, daemon_dirs) -> None:  # type: ignore[no-untyped-def]
    _, inbox = daemon_dirs
    os.chmod(inbox, 0o777)
    daemon: DaemonProc = make_daemon().start()
    assert daemon.wait() != 0
    assert f"chmod go-w {inbox}" in daemon.output
    assert "writable by other users" in daemon.output


def test_group_writable_config_is_refused(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "runspecd.yaml"
    config.write_text("hourly_cost: 1.5\n")
    os.chmod(config, 0o664)
    daemon: DaemonProc = make_daemon(config=config).start()
    assert daemon.wait() != 0
    assert f"chmod go-w {config}" in daemon.output


def test_unknown_config_key_is_a_usage_error(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "runspecd.yaml"
    config.write_text("idle_finsh: 30m\n")
    os.chmod(config, 0o600)
    daemon: DaemonProc = make_daemon(config=config).start()
    assert daemon.wait() == 2
    assert "unknown key 'idle_finsh'" in daemon.output


def test_one_daemon_per_state_folder(make_daemon) -> None:  # type: ignore[no-untyped-def]
    first: DaemonProc = make_daemon().start()
    first.wait_ready()
    second: DaemonProc = make_daemon().start()
    assert second.wait() != 0
    assert first.proc is not None
    assert f"pid {first.proc.pid}" in second.output
    assert first.proc.poll() is None
    assert first.stop() == 0
    # The lock dies with its holder: a new daemon starts at once.
    third: DaemonProc = make_daemon().start()
    third.wait_ready()


def test_sighup_reloads_the_config(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "runspecd.yaml"
    config.write_text("hourly_cost: 1.0\n")
    os.chmod(config, 0o600)
    daemon: DaemonProc = make_daemon(config=config).start()
    daemon.wait_ready()
    config.write_text("hourly_cost: 2.0\nrescan_every: nonsense\n")
    daemon.notify.messages.clear()
    daemon.signal(signal.SIGHUP)
    daemon.notify.wait_for("RELOADING=1")
    wait_until(lambda: "config reload failed, keeping the old one" in daemon.output)
    config.write_text("hourly_cost: 2.0\n")
    daemon.signal(signal.SIGHUP)
    wait_until(lambda: daemon.output.count("SIGHUP: reloading") == 2)
    daemon.notify.wait_for("READY=1")
    assert daemon.proc is not None and daemon.proc.poll() is None
    assert daemon.stop() == 0


def test_sigkill_leaves_no_stale_lock_and_the_daemon_restarts(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    daemon.signal(signal.SIGKILL)
    daemon.wait()
    again: DaemonProc = make_daemon().start()
    again.wait_ready()
    assert again.stop() == 0


def _idle_config(tmp_path: Path, marker: Path) -> Path:
    config = tmp_path / "runspecd.yaml"
    config.write_text(
        f"idle_finish: 3s\nfinish: {{action: command, command: [/usr/bin/touch, {marker}]}}\n"
    )
    os.chmod(config, 0o600)
    return config


def _queue_and_cancel(state: Path, name: str) -> None:
    from runspec.clock import SYSTEM
    from runspec.daemon.queue import request_cancel
    from runspec.run.accept import accept
    from runspec.spec.loader import load_spec_text
    from runspec.store.paths import StateLayout

    accept(load_spec_text(spec_text(name), f"{name}.yaml"), state, None, SYSTEM)
    request_cancel(StateLayout(state).run_paths(name), SYSTEM)


def test_idle_finish_is_never_armed_on_a_fresh_machine(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "finished-the-machine"
    daemon: DaemonProc = make_daemon(config=_idle_config(tmp_path, marker)).start()
    daemon.wait_ready()
    time.sleep(5)  # longer than idle_finish: nothing has run, so nothing may end the machine
    assert not marker.exists()


def test_idle_finish_after_a_run_ended_survives_a_daemon_kill(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "finished-the-machine"
    config = _idle_config(tmp_path, marker)
    first: DaemonProc = make_daemon(config=config)
    _queue_and_cancel(first.state, "short")
    first.start()
    first.wait_ready()
    wait_until(lambda: "idle finish armed: command in 3s" in first.output, what="the arming")
    first.signal(signal.SIGKILL)  # before it is due: the record holds the run's end
    first.wait()
    assert not marker.exists()
    time.sleep(4)  # the deadline passes while no daemon runs
    second: DaemonProc = make_daemon(config=config).start()
    second.wait_ready()
    wait_until(marker.exists, what="the idle finish's command")
    assert "applying the idle finish (command)" in second.output
    # The idle finish acts for the machine: machine.json says what it did, no run's record
    # (written once the command has returned, a moment after it made the marker).
    wait_until(lambda: _machine(second.state)["pending"].get("result"), what="the result")
    machine = _machine(second.state)
    assert machine["pending"]["run"] == "the machine"
    assert machine["pending"]["result"]["action"] == "command"
    record = json.loads((second.state / "jobs/short/record.json").read_text())
    assert record["finish"] == {}


def _machine(state: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((state / "machine.json").read_text())
    return found


@pytest.mark.parametrize("how", ["--dry-run", "finish_dry_run: true"])
def test_a_dry_run_daemon_prints_the_finish_and_does_nothing(  # type: ignore[no-untyped-def]
    make_daemon, tmp_path: Path, how: str
) -> None:
    marker = tmp_path / "finished-the-machine"
    config = None
    if how.startswith("finish_dry_run"):
        config = tmp_path / "runspecd.yaml"
        config.write_text(how + "\n")
        os.chmod(config, 0o600)
    daemon: DaemonProc = make_daemon(config=config)
    # The run fails at its dataset at once; its finish would then run the command.
    text = spec_text("dry").replace(
        "finish:\n  action: none\n",
        f"finish:\n  action: command\n  command: [/usr/bin/touch, {marker}]\n",
    )
    drop(daemon.inbox, "dry.yaml", text)
    daemon.start("--once", *([how] if how == "--dry-run" else []))
    assert daemon.wait() == 0, daemon.output
    assert f"dry: finish (dry run, nothing done): would run ['/usr/bin/touch', '{marker}']" in (
        daemon.output
    )
    assert not marker.exists(), "a dry run ran the finish"
    record = json.loads((daemon.state / "jobs/dry/record.json").read_text())
    assert record["status"] == "finished"
    assert record["finish"]["dry_run"] is True and record["finish"]["action"] == "command"
