"""The failsafe where systemd is not PID 1 (most rented containers: vast.ai, RunPod): a detached
process standing in for the transient timer.

It is started in a session of its own and left to init (`setsid -f`), so it outlives the
daemon, `runspec run`, the SSH session and the shell that started them. It sleeps until the
run's fire time, leaving early when the run ends or its state folder goes, then does what the
timer would: `runspec.machine.failsafe fire`. Its identity (pid, start time, boot id) goes to the
run's `failsafe-watch.json`, checked before it is ever signalled.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from runspec.clock import SYSTEM, Clock
from runspec.identity import ProcessIdentity
from runspec.store.atomic import write_json_atomic
from runspec.store.paths import RunPaths
from runspec.store.state import DamagedRecord, RecordStore, RunRecord, RunStatus

POLL_S = 30.0  # how often a waiting watcher looks whether its run ended


def start(argv: list[str], log_file: Path) -> None:
    """Start `argv` detached for good (its own session, reparented to init)."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    setsid = shutil.which("setsid")
    command = [setsid, "-f", *argv] if setsid else argv
    with log_file.open("ab") as out:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    if setsid:
        proc.wait(timeout=30)  # `setsid -f` forks the watcher and returns at once


def stop(paths: RunPaths) -> bool:
    """Stop the run's watcher, if one is alive; True when one was."""
    try:
        ident = ProcessIdentity.from_json(json.loads(paths.failsafe_watch.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return False
    paths.failsafe_watch.unlink(missing_ok=True)
    if not ident.alive():
        return False
    os.kill(ident.pid, signal.SIGTERM)  # the identity was checked: it is our watcher
    return True


def _ended(paths: RunPaths) -> str | None:
    if not paths.job_dir.is_dir():
        return "its state folder is gone"
    store = RecordStore(paths.state)
    try:
        record = store.load(paths.name)
    except DamagedRecord:
        return None  # still there; firing judges it
    if record is None and store.damaged(paths.name) is not None:
        return None  # set aside as damaged: firing acts on its job folder
    if record is None:
        return "its record is gone"
    if record.status is RunStatus.FINISHED and not end_unconfirmed(record):
        return "the run has ended"
    return None


def end_unconfirmed(record: RunRecord) -> bool:
    """The run ended, but the stop or destroy it asked for was never confirmed by the
    provider: the machine may still bill, so its failsafe stays armed."""
    return record.finish is not None and record.finish.unconfirmed_end


def watch(
    paths: RunPaths,
    at: float,
    fire: Callable[[], int],
    clock: Clock = SYSTEM,
    say: Callable[[str], None] = print,
) -> int:
    """Wait for `at` (epoch seconds), then `fire()`; 0 when the run ended first."""
    stopped = threading.Event()

    def on_term(signum: int, frame: FrameType | None) -> None:
        stopped.set()  # wakes the wait below at once

    signal.signal(signal.SIGTERM, on_term)
    ident = ProcessIdentity.of(os.getpid())
    if ident is not None:
        write_json_atomic(paths.failsafe_watch, ident.to_json())
    say(f"failsafe watcher for {paths.name}: fires at {at:.0f} unless the run ends first")
    try:
        while not stopped.is_set():
            why = _ended(paths)
            if why is not None:
                say(f"failsafe watcher for {paths.name}: {why}; nothing to do")
                return 0
            left = at - clock.time()
            if left <= 0:
                return fire()
            stopped.wait(min(POLL_S, left))
        say(f"failsafe watcher for {paths.name}: stopped")
        return 0
    finally:
        _forget(paths, ident)


def _forget(paths: RunPaths, ident: ProcessIdentity | None) -> None:
    """Remove our identity file, unless a newer watcher has written its own there."""
    try:
        if ident is not None and json.loads(paths.failsafe_watch.read_text()) == ident.to_json():
            paths.failsafe_watch.unlink()
    except (OSError, ValueError):
        pass
