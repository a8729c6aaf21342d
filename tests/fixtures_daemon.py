"""Fixtures for the daemon's tests: a real `runspec daemon` subprocess, a real sd_notify socket."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from runspec.store.paths import RunPaths

REPO = Path(__file__).resolve().parent.parent
BOUND = 60.0  # every wait in these tests is bounded by this


def wait_until(predicate: Callable[[], object], timeout: float = BOUND, what: str = "") -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what or predicate}")


def runspec_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`runspec ARGS` as a person types it, from the checkout; never raises on its exit code."""
    return subprocess.run(
        [sys.executable, "-m", "runspec", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


def spec_text(name: str, *, data_path: str = "/nonexistent/data.yaml", extra: str = "") -> str:
    """A valid spec. By default its dataset path does not exist: the run ends quickly."""
    return (
        "runspec: 1\n"
        f"name: {name}\n"
        f"dataset:\n  path: {data_path}\n"
        "train:\n  model: yolo9-t\n  epochs: 2\n  batch: 4\n  imgsz: 64\n  device: cpu\n"
        "  args: {pretrained: false, workers: 0}\n"
        "budget:\n  wall_clock: 10m\n"
        "preflight: {matmul: false, collective: false, doctor: false}\n"
        "finish:\n  action: none\n" + extra
    )


class NotifySocket:
    """What systemd's NOTIFY_SOCKET receives, collected for assertions."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.1)
        self.messages: list[str] = []

    def drain(self) -> list[str]:
        while True:
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except (TimeoutError, BlockingIOError):
                return self.messages

    def wait_for(self, text: str, timeout: float = BOUND) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for message in self.drain():
                if text in message:
                    return message
        raise AssertionError(f"no {text!r} notification within {timeout}s: {self.messages}")

    def close(self) -> None:
        self.sock.close()


class DaemonProc:
    def __init__(self, tmp: Path, state: Path, inbox: Path, config: Path | None) -> None:
        self.state = state
        self.inbox = inbox
        self.config = config
        self.notify = NotifySocket(tmp / f"notify-{time.monotonic_ns()}.sock")
        self.out = tmp / f"daemon-{time.monotonic_ns()}.out"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(
        self,
        *extra: str,
        watchdog_usec: int = 1_000_000,
        env: dict[str, str] | None = None,
        wrap: Sequence[str] = (),
    ) -> DaemonProc:
        """`wrap` goes before the command (say, setpriv dropping every capability, as the
        shipped unit does)."""
        cmd = [*wrap, sys.executable, "-m", "runspec", "daemon", "--state", str(self.state)]
        cmd += ["--inbox", str(self.inbox)]
        if self.config is not None:
            cmd += ["--config", str(self.config)]
        environ = {
            **os.environ,
            "NOTIFY_SOCKET": str(self.notify.path),
            "WATCHDOG_USEC": str(watchdog_usec),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        environ.pop("WATCHDOG_PID", None)
        with self.out.open("ab") as out:
            self.proc = subprocess.Popen(
                [*cmd, *extra], stdout=out, stderr=subprocess.STDOUT, env=environ, cwd=REPO
            )
        return self

    def wait_ready(self, timeout: float = BOUND) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"the daemon exited {self.proc.returncode}: {self.output}")
            for message in self.notify.drain():
                if "READY=1" in message:
                    return message
        raise AssertionError(f"no READY=1 within {timeout}s: {self.output}")

    @property
    def output(self) -> str:
        return self.out.read_text(errors="replace")

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def wait(self, timeout: float = BOUND) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def stop(self, timeout: float = BOUND) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # our own child, identified by its Popen handle
            self.proc.wait(timeout=10)
            raise

    def record(self, name: str) -> dict[str, object] | None:
        path = self.state / "jobs" / name / "record.json"
        try:
            data: dict[str, object] = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        return data


@pytest.fixture
def daemon_dirs(tmp_path: Path) -> tuple[Path, Path]:
    state = tmp_path / "state"
    inbox = tmp_path / "inbox"
    state.mkdir(mode=0o700)
    inbox.mkdir(mode=0o700)
    return state, inbox


@pytest.fixture
def make_daemon(
    tmp_path: Path, daemon_dirs: tuple[Path, Path]
) -> Iterator[Callable[..., DaemonProc]]:
    made: list[DaemonProc] = []

    def make(config: Path | None = None, state: Path | None = None) -> DaemonProc:
        st, inbox = daemon_dirs
        daemon = DaemonProc(tmp_path, state or st, inbox, config)
        made.append(daemon)
        return daemon

    yield make
    for daemon in made:
        try:
            daemon.stop()
        finally:
            daemon.notify.close()


def drop(inbox: Path, name: str, text: str) -> Path:
    """Write a spec the way `runspec submit` does: a temp name in the inbox, then a rename."""
    tmp = inbox / f".{name}.tmp"
    tmp.write_text(text)
    os.replace(tmp, inbox / name)
    return inbox / name


def end_leftovers(state: Path) -> None:
    """What a daemon stopped by SIGTERM leaves on purpose (its runs' trainers and detached
    failsafe watchers outlive it, as on a real machine) ended by their recorded identities,
    so a test leaves nothing running."""
    from runspec.machine import watcher
    from runspec.store.paths import StateLayout
    from runspec.trainer.launcher import TrainerHandle

    layout = StateLayout(state)
    jobs = layout.jobs
    for job in sorted(jobs.iterdir()) if jobs.is_dir() else []:
        try:
            paths = layout.run_paths(job.name)
        except Exception:  # a folder that is no run's: nothing of ours runs for it
            continue
        _await_watcher(paths)
        watcher.stop(paths)
        handle = TrainerHandle.find(paths)
        if handle is not None and handle.alive():
            handle.kill_now()


WATCHER_START_S = 20.0  # a detached watcher's Python start, on a loaded two-core machine


def _await_watcher(paths: RunPaths) -> None:
    """A failsafe watcher armed for a run that has not ended (a daemon stopped just after it
    armed one) writes its identity only once its Python is up: wait for it, so it can be
    ended by its identity. A run that ended needs none: its watcher leaves on its own."""
    from runspec.store.state import DamagedRecord, RecordStore, RunStatus

    try:
        armed = json.loads(paths.failsafe_file.read_text())
        record = RecordStore(paths.state).load(paths.name)
    except (OSError, ValueError, DamagedRecord):
        return
    if not (isinstance(armed, dict) and armed.get("armed") and armed.get("unit") == "watcher"):
        return
    if "fired" in armed:  # it fired and left
        return
    if record is None or record.status is RunStatus.FINISHED:
        return
    end = time.monotonic() + WATCHER_START_S
    while not paths.failsafe_watch.exists() and time.monotonic() < end:
        time.sleep(0.1)


@contextlib.contextmanager
def paused(pid: int) -> Iterator[None]:
    """A trainer held still (SIGSTOP) while its owners change hands: a machine too busy to run
    it for a while. It cannot finish its last epochs meanwhile, so a few epochs suffice where
    many once kept it alive through a daemon's restart."""
    os.kill(pid, signal.SIGSTOP)  # raises if the trainer is gone already
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def trainer_pid(state: Path, name: str) -> int:
    """The pid of run `name`'s trainer, from its trainer.json."""
    trainer = json.loads((state / "jobs" / name / "trainer.json").read_text())
    return int(trainer["identity"]["pid"])
