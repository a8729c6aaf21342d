"""Safe, idempotent extraction of a dataset tar.

Every member is checked before anything is written: the standard library's `data_filter`
decides, and a member it would have to rewrite (an absolute name, say) is refused rather than
silently changed, because a dataset tar that needs rewriting is not the tar its author thinks it
is. The files go to a temporary folder inside `dest` and are renamed into place only when all is
well; a marker records which tar (sha256) was extracted, so a re-run skips the work.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

from runspec.errors import RunspecError
from runspec.units import format_bytes

MARKER_DIR = ".runspec-extracted"
# Room left on the filesystem after extraction: a dataset that fills the disk to the last
# byte leaves none for checkpoints, logs or the Hub cache.
FREE_MARGIN_BYTES = 100 * 10**6


class Progress(Protocol):
    """What a long step reports to (a runspec.meter.Meter): `add(n)` as bytes go by,
    `close()` at its end."""

    def add(self, n: int) -> None: ...

    def close(self) -> None: ...


class _Silent:
    def add(self, n: int) -> None:
        del n

    def close(self) -> None:
        pass


# (what is being done, bytes in all) -> where its progress goes.
MeterFactory = Callable[[str, int], Progress]


def _quiet(what: str, total: int) -> Progress:
    return _Silent()


class UnsafeTarError(RunspecError):
    """The tar holds a member runspec will not write; the message names it."""


@dataclass(frozen=True)
class ExtractResult:
    sha256: str
    entries: tuple[str, ...]  # the top-level names placed in dest
    skipped: bool  # True when the marker said this tar was already extracted


def sha256_file(path: Path, chunk: int = 1 << 20, progress: Progress | None = None) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
            if progress is not None:
                progress.add(len(block))
    return digest.hexdigest()


def free_bytes(path: Path) -> int:
    """Free space for an unprivileged writer on the filesystem that holds `path` (or would)."""
    probe = path
    while not probe.exists():
        probe = probe.parent
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize


class MemberCheck:
    """The checks of one member at a time, in the tar's order: what `check_members` runs over a
    whole listing, and what the streaming extraction (runspec.dataset.streamtar) runs on each
    member as it arrives, before writing it."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.links: set[PurePosixPath] = set()
        self.total = 0  # declared bytes of the files seen so far

    def check(self, member: tarfile.TarInfo) -> None:
        name = member.name
        path = PurePosixPath(name)
        if ".." in path.parts:
            raise UnsafeTarError(f"tar member {name!r} has a '..' component; refused")
        try:
            filtered = tarfile.data_filter(member, str(self.dest))
        except tarfile.FilterError as exc:
            raise UnsafeTarError(f"tar member {name!r} refused: {exc}") from exc
        if filtered.name != member.name or filtered.linkname != member.linkname:
            raise UnsafeTarError(
                f"tar member {name!r} would have to be rewritten as {filtered.name!r} "
                "to extract safely; refused (rebuild the tar with relative names)"
            )
        # A file written through a symlink the same tar created lands wherever the link points;
        # data_filter cannot see that before the link exists on disk.
        for parent in path.parents:
            if parent in self.links:
                raise UnsafeTarError(
                    f"tar member {name!r} would be written through the symlink {str(parent)!r}; "
                    "refused"
                )
        if member.issym() or member.islnk():
            self.links.add(path)
        if member.isfile():
            self.total += member.size


def check_members(members: list[tarfile.TarInfo], dest: Path) -> int:
    """Refuse the first unsafe member; return the total declared size of the files."""
    checker = MemberCheck(dest)
    for member in members:
        checker.check(member)
    return checker.total


def marker_path(dest: Path, key: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)
    return dest / MARKER_DIR / f"{safe}.json"


def read_marker(marker: Path) -> dict[str, object] | None:
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def source_identity(tar_path: Path) -> dict[str, int]:
    st = tar_path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}


def marker_entries(marker: dict[str, object]) -> tuple[str, ...] | None:
    entries = marker.get("entries")
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return None
    return tuple(entries)


def _already_extracted(marker: dict[str, object], dest: Path, sha: str) -> tuple[str, ...] | None:
    if marker.get("sha256") != sha:
        return None
    entries = marker_entries(marker)
    if entries is None or not all((dest / e).exists() for e in entries):
        return None
    return entries


def write_marker(marker: Path, payload: dict[str, object]) -> None:
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_suffix(".tmp")
    with tmp.open("w") as fh:
        json.dump(payload, fh, indent=2)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(marker)


def place(tmp: Path, dest: Path, entries: list[str], previous: tuple[str, ...]) -> None:
    """Rename each top-level entry into dest; an entry of an earlier extraction is replaced."""
    for entry in entries:
        target = dest / entry
        if (target.exists() or target.is_symlink()) and entry not in previous:
            raise RunspecError(
                f"{target} already exists and was not extracted by runspec from this tar; "
                "move it away or set dataset.extract_to to another folder"
            )
    for entry in entries:
        target = dest / entry
        if target.exists() or target.is_symlink():
            trash = Path(tempfile.mkdtemp(prefix=".runspec-old-", dir=dest))
            target.rename(trash / entry)
            (tmp / entry).rename(target)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            (tmp / entry).rename(target)


def _counted(members: list[tarfile.TarInfo], progress: Progress) -> Iterator[tarfile.TarInfo]:
    """The members, each counted as extracting it begins (the one before is done by then)."""
    for member in members:
        yield member
        if member.isfile():
            progress.add(member.size)


def read_members(tar: tarfile.TarFile, tar_path: Path, max_files: int) -> list[tarfile.TarInfo]:
    """The tar's members, read one by one and refused past `max_files`: a small tar of empty
    members (300,000 from 1.9 MB) would otherwise cost minutes and most of the daemon's memory
    before any check ran."""
    members: list[tarfile.TarInfo] = []
    try:
        while (member := tar.next()) is not None:
            members.append(member)
            if len(members) > max_files:
                raise UnsafeTarError(
                    f"{tar_path.name} holds more than {max_files} members: refused before "
                    "extracting anything (raise dataset.max_files if the dataset is that big)"
                )
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise RunspecError(f"{tar_path} is a damaged tar archive: {exc}") from exc
    return members


def _check_inodes(members: list[tarfile.TarInfo], dest: Path) -> None:
    """Every member takes an inode; a filesystem out of them fails mid-extraction."""
    st = os.statvfs(dest)
    if st.f_files and len(members) > st.f_favail:  # f_files 0: the filesystem has no limit
        raise UnsafeTarError(
            f"the tar's {len(members)} members need as many inodes, and {dest}'s filesystem has "
            f"{st.f_favail} free: free some, or extract elsewhere (dataset.extract_to)"
        )


def extract(
    tar_path: Path,
    dest: Path,
    key: str | None = None,
    meter: MeterFactory = _quiet,
    max_files: int = 200_000,
) -> ExtractResult:
    """Extract `tar_path` into `dest` safely; `key` names the marker (default: the tar's name).
    `meter` is told of the hashing and the extraction, the two long steps.

    Raises UnsafeTarError naming the member for a hostile or oversized tar; nothing is then
    left in dest but the (removed) temporary folder.
    """
    dest.mkdir(parents=True, exist_ok=True)
    dest = dest.resolve()
    marker = marker_path(dest, key or tar_path.name)
    known = read_marker(marker) or {}
    # The very file hashed last time (same inode, size, mtime): trust the recorded sha256
    # rather than read a large tar again.
    if known.get("source") == source_identity(tar_path):
        sha = str(known.get("sha256"))
        done = _already_extracted(known, dest, sha)
        if done is not None:
            return ExtractResult(sha256=sha, entries=done, skipped=True)
    try:
        tar = _open(tar_path)
    except (tarfile.TarError, OSError) as exc:
        raise RunspecError(f"{tar_path} is not a readable tar archive: {exc}") from exc
    with tar:
        members = read_members(tar, tar_path, max_files)
        tmp = Path(tempfile.mkdtemp(prefix=".runspec-tmp-", dir=dest))
        try:
            total = check_members(members, tmp)
            _check_space(members, dest, total)
            _check_inodes(members, dest)
            hashing = meter(f"checking {tar_path.name} (sha256)", tar_path.stat().st_size)
            try:
                sha = sha256_file(tar_path, progress=hashing)
            finally:
                hashing.close()
            done = _already_extracted(known, dest, sha)
            if done is None:
                extracting = meter(f"extracting {tar_path.name}", total)
                try:
                    tar.extractall(tmp, members=_counted(members, extracting), filter="data")
                finally:
                    extracting.close()
                entries = sorted(p.name for p in tmp.iterdir())
                place(tmp, dest, entries, marker_entries(known) or ())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    write_marker(
        marker,
        {
            "tar": str(tar_path),
            "sha256": sha,
            "entries": list(done) if done is not None else entries,
            "bytes": total,
            "source": source_identity(tar_path),
        },
    )
    if done is not None:
        return ExtractResult(sha256=sha, entries=done, skipped=True)
    return ExtractResult(sha256=sha, entries=tuple(entries), skipped=False)


def _open(tar_path: Path) -> tarfile.TarFile:
    return tarfile.open(tar_path, "r:*")


def _check_space(members: list[tarfile.TarInfo], dest: Path, total: int) -> None:
    free = free_bytes(dest) - FREE_MARGIN_BYTES
    if total <= free:
        return
    running = 0
    for member in members:
        if member.isfile():
            running += member.size
            if running > free:
                raise UnsafeTarError(
                    f"tar member {member.name!r} ({format_bytes(member.size)}) takes the "
                    f"extraction to {format_bytes(running)} of {format_bytes(total)}, beyond the "
                    f"{format_bytes(max(free, 0))} free in {dest}; free space or use a larger disk"
                )


def is_extracted(dest: Path, key: str, sha256: str | None = None) -> bool:
    """Whether the marker for `key` says its tar (of that sha256, when given) sits extracted in
    dest (no hashing)."""
    dest = dest.resolve() if dest.exists() else dest
    known = read_marker(marker_path(dest, key)) or {}
    if sha256 is not None and known.get("sha256") != sha256:
        return False
    entries = marker_entries(known)
    return entries is not None and all((dest / e).exists() for e in entries)
