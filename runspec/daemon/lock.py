"""One daemon per state folder: an fcntl lock held for the daemon's lifetime (released by the
kernel when the process dies, so a SIGKILLed daemon never leaves a stale lock behind)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from runspec.errors import RunspecError


class AlreadyRunning(RunspecError):
    pass


class StateLock:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "runspecd.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise AlreadyRunning(
                f"another runspec daemon (pid {holder}) already uses the state folder "
                f"{self.path.parent}; stop it first or pass a different --state"
            ) from exc
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @staticmethod
    def holder(state_dir: Path) -> int | None:
        """The pid of the daemon holding the lock, or None when no daemon runs."""
        path = state_dir / "runspecd.lock"
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                text = os.read(fd, 64).decode(errors="replace").strip()
                return int(text) if text.isdigit() else -1
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)
