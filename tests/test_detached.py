"""Containers without systemd (vast.ai, RunPod): `runspec daemon --detach` outlives the shell
and the SSH session that started it and reads the same environment file for the provider's
key; the failsafe's stand-in, a detached watcher, outlives runspec and fires at its time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from runspec.clock import utc_iso
from runspec.machine import failsafe, watcher
from runspec.run.accept import accept
from runspec.spec.loader import load_spec_text
from runspec.store.state import RecordStore, RunStatus
from tests.fixtures_daemon import REPO, drop, end_leftovers, spec_text, wait_until
from tests.fixtures_providers import StandIn, VastInstance
from tests.fixtures_push import write_checkpoint

KEY = "vast-key-only-in-the-env-file"


def test_a_detached_daemon_outlives_its_session_and_reads_the_env_file(
    tmp_path: Path, standin: StandIn, provider_env: dict[str, str]
) -> None:
    VastInstance(standin)
    state, inbox = tmp_path / "state", tmp_path / "inbox"
    inbox.mkdir(mode=0o700)
    env_file = tmp_path / "env"
    env_file.write_text(f"# secrets\nCONTAINER_ID=4242\nCONTAINER_API_KEY='{KEY}'\n")
    env_file.chmod(0o600)
    runspec = f"{sys.executable} -m runspec daemon --detach --state {state} --inbox {inbox}"
    # A login shell as an SSH session runs it, then the session ends (SIGHUP to its group).
    shell = subprocess.run(
        ["bash", "-c", f"{runspec} --env-file {env_file} && kill -HUP 0"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, **provider_env},
        start_new_session=True,
        check=False,
    )
    assert "runspecd started: pid" in shell.stdout, shell.stdout + shell.stderr
    pid = int((state / "runspecd.pid").read_text())
    try:
        assert psutil.pid_exists(pid) and os.getsid(pid) != os.getsid(0)
        # A run whose finish stops the machine through vast, with the key from the env file.
        text = spec_text("contained").replace(
            "finish:\n  action: none\n", "finish:\n  action: stop\n  provider: vast\n"
        )
        drop(inbox, "contained.yaml", text)
        wait_until(lambda: bool(standin.made("PUT")), timeout=120, what="the stop")
        (stop,) = standin.made("PUT")
        assert stop.header("Authorization") == f"Bearer {KEY}"
        assert KEY not in (state / "runspecd.log").read_text()
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not psutil.pid_exists(pid), timeout=60, what="the daemon to exit")


def test_the_pid_file_is_written_even_when_detachs_parent_is_killed_at_once(
    tmp_path: Path,
) -> None:
    state, inbox = tmp_path / "state", tmp_path / "inbox"
    inbox.mkdir(mode=0o700)
    parent = subprocess.Popen(
        [sys.executable, "-m", "runspec", "daemon", "--detach", "--state", str(state),
         "--inbox", str(inbox), "--env-file", str(tmp_path / "no-env")],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # Killed as soon as its child exists: before it could see the child take the state folder.
    wait_until(lambda: bool(psutil.Process(parent.pid).children()), timeout=60, what="the child")
    (child,) = psutil.Process(parent.pid).children()
    parent.kill()
    parent.wait(timeout=30)
    pid_file = state / "runspecd.pid"
    try:
        wait_until(pid_file.exists, timeout=60, what="runspecd.pid")
        assert int(pid_file.read_text()) == child.pid
        log = state / "runspecd.log"
        wait_until(lambda: "runspecd: watching" in log.read_text(), timeout=60, what="serving")
        os.kill(int(pid_file.read_text()), signal.SIGTERM)  # the printed stop command works
        wait_until(lambda: not psutil.pid_exists(child.pid), timeout=60, what="the daemon")
        assert not pid_file.exists()  # a clean exit leaves no stale pid behind
    finally:
        if psutil.pid_exists(child.pid):
            child.kill()


def test_the_failsafe_watcher_outlives_runspec_and_stops_the_machine(
    tmp_path: Path, standin: StandIn, provider_env: dict[str, str]
) -> None:
    VastInstance(standin)
    state = tmp_path / "state"
    spec = load_spec_text(
        spec_text("stranded").replace(
            "finish:\n  action: none\n",
            "finish:\n  action: destroy\n  provider: vast\n  unverified: stop\n"
            f"push:\n  dir: {tmp_path / 'volume'}\n",
        ),
        "stranded.yaml",
    )
    record = accept(spec, state)
    record.status = RunStatus.TRAINING
    record.started_at = utc_iso(time.time() - 900)
    record.deadline = utc_iso(time.time() - 300)
    RecordStore(state).save(record)
    write_checkpoint(state / "runs/stranded/weights/last.pt", 2, size=1000)  # never pushed

    paths = RecordStore(state).layout.run_paths("stranded")
    argv = failsafe.watch_command(spec, paths, time.time() + 3)
    env = {**os.environ, **provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": KEY}
    saved = dict(os.environ)
    os.environ.update(env)  # what the daemon's environment would hand the watcher
    try:
        watcher.start(argv, paths.failsafe_log)  # as arm() starts it; nobody waits on it
    finally:
        os.environ.clear()
        os.environ.update(saved)
    wait_until(lambda: bool(standin.made("PUT")), timeout=60, what="the watcher's stop")
    assert standin.made("DELETE") == [], "unverified weights, yet a destroy"
    # The stop is sent before the watcher notes it fired: wait for the note to exist.
    wait_until(
        lambda: paths.failsafe_file.exists() and "fired" in paths.failsafe_file.read_text(),
        timeout=30,
        what="the watcher's note that it fired",
    )
    fired = json.loads(paths.failsafe_file.read_text())["fired"]
    assert fired["result"]["action"] == "stop" and fired["result"]["ok"]
    assert "the run is still training past deadline + overrun" in paths.failsafe_log.read_text()


def test_a_watcher_armed_just_before_the_cleanup_is_ended_by_it(tmp_path: Path) -> None:
    """A daemon stopped just after it armed a run's failsafe (the inbox fuzz test's last
    probe): the detached watcher has not written its identity yet when the test's cleanup
    (end_leftovers) looks. It used to outlive the whole suite; the cleanup waits for it."""
    state = tmp_path / "state"
    spec = load_spec_text(spec_text("armed"), "armed.yaml")
    record = accept(spec, state)
    record.status = RunStatus.PREFLIGHT  # as a stopped daemon leaves a run it had started
    record.started_at = utc_iso(time.time())
    record.deadline = utc_iso(time.time() + 600)
    RecordStore(state).save(record)
    paths = RecordStore(state).layout.run_paths("armed")
    armed = failsafe.arm(spec, paths, record, root=tmp_path)  # no systemd there: a watcher
    assert armed.armed and armed.unit == "watcher", armed
    try:
        end_leftovers(state)
        wait_until(
            lambda: "failsafe watcher for armed: stopped" in paths.failsafe_log.read_text(),
            timeout=30,
            what="the watcher's stop",
        )
    finally:  # on the old cleanup: end it here, by its identity once it wrote one
        wait_until(lambda: "fires at" in paths.failsafe_log.read_text(), 30, "its start")
        watcher.stop(paths)


def test_detach_starts_from_a_folder_that_holds_a_folder_named_runspec(tmp_path: Path) -> None:
    """The folder above an editable checkout, or /etc after `runspec install`: `python -m
    runspec` there would import the checkout's folder (no __main__) and the box would bill
    with no daemon; every child runspec starts is isolated from the caller's folder."""
    state, inbox, here = tmp_path / "state", tmp_path / "inbox", tmp_path / "above"
    inbox.mkdir(mode=0o700)
    (here / "runspec").mkdir(parents=True)  # a checkout named runspec: no __main__ in it
    (here / "runspec" / "README.md").write_text("not the package\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    runspec = str(Path(sys.executable).with_name("runspec"))
    started = subprocess.run(
        [
            runspec,
            "daemon",
            "--detach",
            "--state",
            str(state),
            "--inbox",
            str(inbox),
            "--env-file",
            str(tmp_path / "no-env"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=here,
        env=env,
        check=False,
    )
    assert started.returncode == 0, started.stdout + started.stderr
    assert "runspecd started: pid" in started.stdout
    pid = int((state / "runspecd.pid").read_text())
    stopped = subprocess.run(
        [runspec, "daemon", "--stop", "--state", str(state)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=here,
        env=env,
        check=False,
    )
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    wait_until(lambda: not psutil.pid_exists(pid), timeout=60, what="the daemon to exit")
