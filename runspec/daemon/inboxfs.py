"""The inbox's file operations: relative to folder descriptors, never through a link.

The daemon runs as root and moves files that whoever wrote into the inbox named. Every name
here is resolved relative to the descriptor of a folder checked to be the daemon's own (a real
folder, not a link, owned by the daemon, writable by nobody else), with links never followed:
a `rejected` replaced by a link to /etc is refused, not written through, and a spec that is a
link to /etc/shadow is moved as the link it is, its target never opened.

A claim is a folder of its own, `claimed/<stamp>-<pid>-<seq>/<name>`: the file keeps its name
(up to the filesystem's 255 bytes) without a prefix pushing it past that limit, and
`.provenance.json` or `.incomplete` travel beside it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import time

from runspec.printable import printable
from runspec.spec.safepaths import CLAIMED
from runspec.spec.specread import SpecTooBig, kind, read_spec
from runspec.spec.yamlload import MAX_BYTES
from runspec.store.paths import REJECTED

log = logging.getLogger("runspec.daemon.inbox")

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
SIDECAR = ".provenance.json"
INCOMPLETE = ".incomplete"
# link() may refuse where rename() or a copy works: another filesystem, no hard links (some
# FUSE and network filesystems), a file with too many links already.
_NO_LINK = (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP)


class FolderProblem(Exception):
    """A folder the daemon writes to is not its own; the message says what it is instead."""


def open_folder(path: str | bytes | os.PathLike[str]) -> int:
    """A descriptor for a configured folder (the inbox, the state folder)."""
    return os.open(path, DIR_FLAGS)


def own_folder(parent_fd: int, name: str) -> int:
    """A descriptor for the folder `name` in `parent_fd`, created (0700) when missing. Raises
    FolderProblem when it is a link, not a folder, not ours, or writable by others."""
    flags = DIR_FLAGS | os.O_NOFOLLOW
    try:
        fd = os.open(name, flags, dir_fd=parent_fd)
    except FileNotFoundError:
        with contextlib.suppress(FileExistsError):  # made meanwhile: checked below
            os.mkdir(name, 0o700, dir_fd=parent_fd)
        fd = os.open(name, flags, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        mode = os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode
        what = "a symbolic link" if stat.S_ISLNK(mode) else kind(mode) or "a regular file"
        raise FolderProblem(
            f"is {what}, not the daemon's own folder: nothing is written through it; "
            "remove it (the daemon makes a new one)"
        ) from exc
    st = os.fstat(fd)
    mode = stat.S_IMODE(st.st_mode)
    why = None
    if st.st_uid != os.geteuid():
        why = f"is owned by uid {st.st_uid}, not by the daemon (uid {os.geteuid()})"
    elif mode & (stat.S_IWGRP | stat.S_IWOTH):
        why = f"is writable by other users (mode {mode:04o}); fix: chmod go-w"
    if why:
        os.close(fd)
        raise FolderProblem(f"{why}: nothing is written through it")
    return fd


def exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def write_private(dir_fd: int, name: str, data: bytes) -> None:
    """`name` in `dir_fd` holds `data`, mode 0600, written whole under a temporary name first."""
    tmp = f".runspec-{os.getpid()}-{time.monotonic_ns()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def _copy(src_fd: int, src: str, dst_fd: int, dst: str) -> None:
    """A copy of a regular file no bigger than a spec may be (link() could not be used)."""
    try:
        data = read_spec(src, dir_fd=src_fd, follow=False)
    except SpecTooBig:  # grew meanwhile: keep what a spec may hold, the .error says why
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=src_fd)
        try:
            data = os.read(fd, MAX_BYTES)
        finally:
            os.close(fd)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(dst, flags, 0o600, dir_fd=dst_fd)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def move(src_fd: int, src: str, dst_fd: int, dst: str) -> None:
    """Move `src` to `dst` (which must not exist), whatever kind of file it is, without
    following it. Link, then unlink, rather than rename where it can: a rename out of a watched
    folder is an IN_MOVED_FROM that watchdog holds back half a second (waiting for its pair),
    and every later inbox event with it."""
    mode = os.stat(src, dir_fd=src_fd, follow_symlinks=False).st_mode
    if stat.S_ISDIR(mode):
        if exists(dst_fd, dst):  # rename() would replace an empty folder
            raise FileExistsError(errno.EEXIST, "exists", dst)
        os.rename(src, dst, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
        return
    try:
        os.link(src, dst, src_dir_fd=src_fd, dst_dir_fd=dst_fd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
        if exists(dst_fd, dst):
            raise FileExistsError(errno.EEXIST, "exists", dst) from exc
        try:
            os.rename(src, dst, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
            return
        except OSError as again:
            if again.errno != errno.EXDEV or not stat.S_ISREG(mode):
                raise
        _copy(src_fd, src, dst_fd, dst)
    os.unlink(src, dir_fd=src_fd)


def rejected_name(name: str, n: int, name_max: int) -> str:
    """The name a rejected file gets: its own, with `.n` before the suffix when taken, cut
    short (marked `~`) where `<name>.error` would pass the filesystem's limit."""
    stem, dot, suffix = name.rpartition(".")
    extra = f".{n}" if n else ""
    budget = name_max - len(".error")
    candidate = f"{stem}{extra}{dot}{suffix}"
    while len(os.fsencode(candidate)) > budget and stem:
        stem = stem[:-1]
        candidate = f"{stem}~{extra}{dot}{suffix}"
    return candidate


def reject(src_fd: int, src: str, rejected_fd: int, name: str, error: bytes) -> str:
    """Move `src` into rejected/ with its `.error` (0600) beside it; the name it got there."""
    name_max = os.fpathconf(rejected_fd, "PC_NAME_MAX")
    n = 0
    while True:
        dest = rejected_name(name, n, name_max)
        n += 1
        if exists(rejected_fd, dest) or exists(rejected_fd, dest + ".error"):
            continue
        try:
            move(src_fd, src, rejected_fd, dest)
        except FileExistsError:
            continue
        break
    write_private(rejected_fd, dest + ".error", error)
    return dest


def claim(inbox_fd: int, name: str, claimed_fd: int, claim_id: str) -> bool:
    """Move `name` out of the inbox into `claimed/<claim_id>/`, its provenance with it; False
    when it was gone meanwhile."""
    os.mkdir(claim_id, 0o700, dir_fd=claimed_fd)
    sub = os.open(claim_id, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=claimed_fd)
    try:
        try:
            move(inbox_fd, name, sub, name)
        except FileNotFoundError:
            os.rmdir(claim_id, dir_fd=claimed_fd)
            return False
        # A name near the limit has no room for `.<name>.provenance.json`: it has none.
        with contextlib.suppress(OSError):
            move(inbox_fd, f".{name}{SIDECAR}", sub, SIDECAR)
    finally:
        os.close(sub)
    return True


def remove_claim(claimed_fd: int, claim_id: str) -> None:
    """Remove what is left of a claim (its sidecars) and its folder."""
    sub = os.open(claim_id, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=claimed_fd)
    try:
        for entry in os.listdir(sub):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry, dir_fd=sub)
    finally:
        os.close(sub)
    os.rmdir(claim_id, dir_fd=claimed_fd)


class Folders:
    """The inbox's folders as descriptors: the inbox and state folders as configured, and
    claimed/ and rejected/ checked to be the daemon's own each time they are used (a check
    costs an open and an fstat). Why one is not usable is kept for the daemon's status."""

    def __init__(self, inbox: str | os.PathLike[str], state: str | os.PathLike[str]) -> None:
        self.inbox_path = os.fspath(inbox)
        self.state_path = os.fspath(state)
        self._fds: dict[str, int] = {}
        self.problems: dict[str, str] = {}

    def _configured(self, key: str, path: str) -> int:
        if key not in self._fds:
            self._fds[key] = open_folder(path)
        return self._fds[key]

    @property
    def inbox(self) -> int:
        return self._configured("inbox", self.inbox_path)

    @property
    def state(self) -> int:
        return self._configured("state", self.state_path)

    def _own(self, parent: int, name: str, shown: str) -> int:
        try:
            fd = own_folder(parent, name)
        except FolderProblem as exc:
            why = f"{shown}/ {exc}"
            if self.problems.get(name) != why:
                log.error("inbox: %s", printable(why))
            self.problems[name] = why
            raise
        if self.problems.pop(name, None) is not None:
            log.info("inbox: %s/ is the daemon's own folder again", printable(shown))
        return fd

    def claimed(self) -> int:
        """A new descriptor for claimed/ (the caller closes it); raises FolderProblem."""
        return self._own(self.state, CLAIMED, os.path.join(self.state_path, CLAIMED))

    def rejected(self) -> int:
        """A new descriptor for rejected/ (the caller closes it); raises FolderProblem."""
        return self._own(self.inbox, REJECTED, os.path.join(self.inbox_path, REJECTED))

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
