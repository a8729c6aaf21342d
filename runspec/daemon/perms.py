"""A spec can end the machine, so nobody but its owner (or root) may write what the daemon reads."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from runspec.errors import RunspecError


class InsecurePermissions(RunspecError):
    pass


def problems(path: Path, uid: int | None = None) -> list[str]:
    """Why `path` (and each folder above it) is writable by someone other than us or root."""
    me = os.geteuid() if uid is None else uid
    found: list[str] = []
    current = path.absolute()
    chain = [current, *current.parents]
    for i, item in enumerate(chain):
        try:
            st = item.stat()
        except FileNotFoundError:
            continue
        # /tmp-style folders (sticky bit) above the target are safe: others cannot rename our files.
        if i > 0 and st.st_mode & stat.S_ISVTX:
            continue
        mode = stat.S_IMODE(st.st_mode)
        if mode & (stat.S_IWGRP | stat.S_IWOTH):
            who = "other users" if mode & stat.S_IWOTH else "its group"
            found.append(f"{item} is writable by {who} (mode {mode:04o}); fix: chmod go-w {item}")
        if st.st_uid not in (0, me):
            found.append(
                f"{item} is owned by uid {st.st_uid}, not by this user or root; "
                f"fix: chown {me} {item}"
            )
    return found


def check(paths: list[Path]) -> None:
    """Raise InsecurePermissions naming every problem and its fix. The one rule of every entry
    point that reads or writes them: the daemon, `runspec run --state`, `submit`, `install`."""
    found: list[str] = []
    for path in paths:
        for problem in problems(path):
            if problem not in found:
                found.append(problem)
    if found:
        raise InsecurePermissions(
            "refusing to start: a spec can end this machine, so the state folder, the inbox and "
            "the config must not be writable by other users: " + "; ".join(found)
        )
