"""Room on disk: whether a write failed for want of space, how much a run still needs for its
next checkpoint, and the disk note that `runspec status` reads when a run's record cannot be
saved.

A full disk never ends a run by itself: the writer that meets ENOSPC says so, the run waits here
for space (or for a reason to stop waiting), and carries on once space is back.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runspec.clock import Clock
from runspec.store.atomic import write_bytes

if TYPE_CHECKING:  # the owner uses this module; only its type comes back here
    from runspec.store.owner import RunOwner

log = logging.getLogger("runspec.store.room")

NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
SPACE_POLL_S = 10.0  # how often a run waiting for disk space looks again (a statvfs: cheap)


def is_no_space(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in NO_SPACE


UNWRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def is_unwritable(exc: BaseException) -> bool:
    """A folder made read-only (remounted, chattr +i): a state to say and wait out."""
    return isinstance(exc, OSError) and exc.errno in UNWRITABLE


def is_stuck(exc: BaseException, state: Path) -> bool:
    """A write that waiting can mend: a full disk, or the state folder made read-only. A
    permission error elsewhere (a path the spec names, a folder the sandbox refuses) is a
    failure to say, not a state to wait out forever."""
    if is_no_space(exc):
        return True
    if not is_unwritable(exc):
        return False
    named = [getattr(exc, "filename", None), getattr(exc, "filename2", None)]
    return any(
        isinstance(n, str | Path) and Path(n).absolute().is_relative_to(state.absolute())
        for n in named
    )


NOTE_SIZE = 4096  # bytes reserved for the disk note: written in place, it needs no new block


def reserve_note(path: Path) -> None:
    """Allocate the disk note's blocks while there is space (at accept), so a disk that later
    fills can still be told about: `runspec status` reads it when the record cannot be saved."""
    if not path.exists():
        write_bytes(path, b" " * NOTE_SIZE, mode=0o600)


def write_note(path: Path, note: dict[str, Any] | None) -> None:
    data = json.dumps(note or {}).encode()[:NOTE_SIZE].ljust(NOTE_SIZE, b" ")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)  # no O_TRUNC: the blocks stay ours
    except OSError:
        return
    try:
        os.pwrite(fd, data, 0)
    except OSError as exc:
        log.warning("cannot write the disk note %s: %s", path, exc)
    finally:
        os.close(fd)


def read_note(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_bytes().strip() or b"{}")
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data else None


def free_bytes(path: str | Path) -> int | None:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


SPACE_FLOOR = 50_000_000  # bytes: room for a small checkpoint even before one was written


def checkpoint_room(run_dir: Path) -> int:
    """Room for one more checkpoint of this run and its staged copy."""
    try:
        one = (run_dir / "weights" / "last.pt").stat().st_size
    except OSError:
        one = 0
    return 2 * max(one, SPACE_FLOOR)


def short_of_room(run_dir: Path) -> bool:
    """The run folder's disk cannot take even one more checkpoint now."""
    free = free_bytes(run_dir)
    return free is not None and free < checkpoint_room(run_dir) // 2


def wait_for_space(
    where: Path,
    needed: int,
    owner: RunOwner,
    clock: Clock,
    tick: float,
    give_up: Callable[[], bool],
) -> bool:
    """Wait until `where`'s disk has `needed` bytes free (True), or `give_up` says to stop
    waiting (False). Looks every SPACE_POLL_S, answers `give_up` every tick."""
    next_look = clock.monotonic()
    while not give_up():
        if clock.monotonic() >= next_look:
            free = free_bytes(where)
            if free is not None and free >= needed:
                owner.clear_disk_full()
                return True
            next_look = clock.monotonic() + SPACE_POLL_S
        clock.sleep(tick)
    return False
