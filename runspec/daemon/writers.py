"""Which of some files a process still holds open for writing, read from Linux's /proc.

A spec written in place (`cat > inbox/x.yaml` from a slow source, a slow copy) is a valid
spec long before its writer is done: its first sixteen lines may already be one, without the
`finish:` that would have ended the machine. Quiet for a second proves nothing about a writer
that pauses; an open descriptor with a write mode does.

This reads /proc directly rather than through psutil's `open_files()`, which stats every open
file of every process: here one readlink per descriptor, and the fdinfo flags of only the
descriptors that point at a file asked about. One pass costs a few milliseconds on a busy
machine; the inbox makes at most one per look at its waiting files.
"""

from __future__ import annotations

import os
from collections.abc import Collection

PROC = b"/proc"


def _writable(pid: bytes, fd: bytes) -> bool:
    try:
        with open(PROC + b"/" + pid + b"/fdinfo/" + fd, "rb") as fh:
            info = fh.read(4096)
    except OSError:  # the process or the descriptor is gone: not held
        return False
    for line in info.splitlines():
        if line.startswith(b"flags:"):
            return int(line.split()[1], 8) & os.O_ACCMODE != os.O_RDONLY
    return False


def held_for_writing(paths: Collection[bytes]) -> dict[bytes, int]:
    """For each of `paths` (absolute, symlinks resolved, as /proc shows them) that another
    process holds open for writing: the pid of one such process."""
    wanted = set(paths)
    found: dict[bytes, int] = {}
    if not wanted:
        return found
    me = str(os.getpid()).encode()
    try:
        pids = [p for p in os.listdir(PROC) if p.isdigit() and p != me]
    except OSError:
        return found
    for pid in pids:
        fd_dir = PROC + b"/" + pid + b"/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:  # gone, or not ours to read (another user's process)
            continue
        for fd in fds:
            try:
                target = os.readlink(fd_dir + b"/" + fd)
            except OSError:
                continue
            if target in wanted and target not in found and _writable(pid, fd):
                found[target] = int(pid)
    return found


def describe(pid: int) -> str:
    """`pid 123 (cat)`, for messages."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as fh:
            comm = fh.read(64).decode("utf-8", "replace").strip()
    except OSError:
        return f"pid {pid}"
    return f"pid {pid} ({comm})"
