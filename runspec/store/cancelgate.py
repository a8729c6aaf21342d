"""One lock between `runspec cancel` and the moment a run's end is decided.

`runspec cancel` answers "the machine is kept" only if the run's finish has not been chosen yet;
the run's driver chooses it (the move to `finishing`) only after looking for a cancel. Both take
`<job>/cancel.lock` around their look and their write, so one of them always sees the other:
either the cancel file is there when the driver decides (and no finish follows), or the record
says `finishing` when the cancel looks (and the command refuses, saying what will happen).
Never "kept" said and the machine ended anyway (issue 35).

The lock is held for a look and one small write: blocking on it is short.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from runspec.store.paths import RunPaths
from runspec.store.room import is_unwritable


@contextlib.contextmanager
def cancel_gate(paths: RunPaths) -> Iterator[None]:
    """Hold the run's cancel lock for the block (waiting for whoever holds it)."""
    try:
        fd = os.open(paths.cancel_lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if not is_unwritable(exc):
            raise
        # A read-only state folder: no cancel file can be written either, so nothing races.
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
