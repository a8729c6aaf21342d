"""Who holds what: fcntl locks on files, each naming its holder (pid and command).

A lock the kernel holds for a process is released when that process dies, however it dies, so
a SIGKILLed owner never leaves a stale lock behind; the file's text only says who held it last.
Used for the daemon's state folder, each run's owner, the machine's end and the trainer.
Stdlib only: the trainer takes one too.
"""

from __future__ import annotations

import fcntl
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from runspec.units import plain_int


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.command})" if self.command else f"pid {self.pid}"


def this_command() -> str:
    """How this process was started, short: `runspec run spec.yaml`, `runspec daemon`."""
    argv = [os.path.basename(sys.argv[0]) or "python", *sys.argv[1:]]
    if argv[0] in ("__main__.py", "-m", "-c") or argv[0].startswith("python"):
        argv[0] = "runspec"
    text = " ".join(argv)
    return text if len(text) <= 120 else text[:117] + "..."


def _parse(text: str) -> Holder | None:
    pid_text, _, command = text.strip().partition(" ")
    pid = plain_int(pid_text)
    return None if pid is None else Holder(pid, command.strip())


class FileLock:
    """An exclusive, non-blocking lock on `path`, held until `release` or exit."""

    def __init__(self, path: Path, command: str | None = None) -> None:
        self.path = path
        self.command = command if command is not None else this_command()
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> Holder | None:
        """Take the lock: None when taken, else who holds it."""
        if self._fd is not None:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 512, 0).decode(errors="replace")
            os.close(fd)
            return _parse(text) or Holder(-1, "")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {self.command}\n".encode(), 0)
        self._fd = fd
        return None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def holder(path: Path) -> Holder | None:
    """Who holds the lock on `path` now; None when nobody does."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _parse(os.pread(fd, 512, 0).decode(errors="replace")) or Holder(-1, "")
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
