"""Reading a spec file's bytes: regular files only, never blocking, never past the size limit.

Opening a FIFO blocks until someone writes to it, reading `/dev/zero` never ends, and a 1 GiB
file read whole costs a gigabyte. So the kind of file is checked before it is opened (a stat
does not open it), opened non-blocking, checked again on the open descriptor (the name may
have been swapped meanwhile), and read no further than the limit plus one byte. `validate`,
`run` and `submit` follow a link the user names, as every command does; the inbox never
follows one (`follow=False`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from runspec.errors import UsageError
from runspec.spec.yamlload import MAX_BYTES

PathArg = str | bytes | Path

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)
_CHUNK = 64 * 1024


class NotRegularFile(UsageError):
    """The path names something other than a regular file; the message says what it is."""


class SpecTooBig(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size  # at least this many bytes


def kind(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, words in _KINDS:
        if test(mode):
            return words
    return "a special file"


def not_regular(path: PathArg, mode: int, dir_fd: int | None = None) -> str:
    """Why `path` is refused: what it is, and for a link where it points (never opened)."""
    if stat.S_ISLNK(mode):
        try:
            target = os.fsdecode(os.readlink(os.fsencode(path), dir_fd=dir_fd))
        except OSError:
            target = "?"
        return (
            f"a symbolic link (to {target}), not a regular file: runspec never follows a link "
            "in the inbox; copy the spec in instead"
        )
    return f"{kind(mode)}, not a regular file: a spec must be a regular file"


def read_spec(path: PathArg, *, dir_fd: int | None = None, follow: bool = True) -> bytes:
    """The file's bytes. Raises NotRegularFile, SpecTooBig, or OSError when it cannot be read."""
    st = os.stat(path, dir_fd=dir_fd, follow_symlinks=follow)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(not_regular(path, st.st_mode, dir_fd))
    if st.st_size > MAX_BYTES:
        raise SpecTooBig(st.st_size)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    if not follow:
        flags |= os.O_NOFOLLOW
    fd = os.open(path, flags, dir_fd=dir_fd)
    try:
        return read_open(fd)
    finally:
        os.close(fd)


def read_open(fd: int) -> bytes:
    """The bytes of an open regular file, no more than the limit plus one."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(not_regular("", st.st_mode))
    if st.st_size > MAX_BYTES:
        raise SpecTooBig(st.st_size)
    chunks: list[bytes] = []
    got = 0
    while got <= MAX_BYTES:
        chunk = os.read(fd, min(_CHUNK, MAX_BYTES + 1 - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    if got > MAX_BYTES:
        raise SpecTooBig(max(got, os.fstat(fd).st_size))
    return b"".join(chunks)
