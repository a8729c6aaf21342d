"""Which write failures the lifecycle waits out (runspec.store.room.is_stuck): a full disk, and
the state folder made read-only, never a permission error elsewhere (a path the spec names,
a folder the sandbox refuses), which waiting cannot mend and which would hold the run in its
phase, its finish never applied, while the machine bills."""

from __future__ import annotations

import errno
from pathlib import Path

from runspec.store.room import is_stuck


def test_only_the_state_folder_made_read_only_is_waited_out(tmp_path: Path) -> None:
    state = tmp_path / "state"
    inside = PermissionError(errno.EACCES, "Permission denied", str(state / "jobs" / "a"))
    read_only = OSError(errno.EROFS, "Read-only file system", str(state / "record.json"))
    elsewhere = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "data"))
    nameless = PermissionError(errno.EPERM, "Operation not permitted")
    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "runs"))
    assert is_stuck(inside, state) and is_stuck(read_only, state)
    assert is_stuck(full, state)  # a full disk anywhere is waited out, as before
    assert not is_stuck(elsewhere, state) and not is_stuck(nameless, state)
