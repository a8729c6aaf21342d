"""Which checkpoint files are whole, without importing torch.

LibreYOLO writes `weights/*.pt` in place with `torch.save`, so a file can be half written at any
moment (a SIGTERM mid-save leaves a truncated, unloadable last.pt). Two checks make a file
trustworthy: its size and mtime still equal what the trainer's callback recorded at the epoch
end (the epoch marker, written after LibreYOLO's saves), and it is a sound zip archive (a torch
checkpoint is one; every member's CRC is checked).

Stdlib only: the pusher and the daemon use this.
"""

from __future__ import annotations

import io
import os
import shutil
import struct
import zipfile
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

from runspec.store.atomic import fsync_dir
from runspec.trainer.control import EpochMarker, FileStat, read_epoch_marker, write_epoch_marker
from runspec.units import plain_int


def epoch_number(name: str) -> int | None:
    """N of LibreYOLO's `epoch_N.pt` (a file's name, without its folder); None for any other
    name, one with N in other than ASCII digits too (the trainer names its own files). The one
    reading of that name: the pusher, the resume and the lease use it."""
    if not (name.startswith("epoch_") and name.endswith(".pt")):
        return None
    return plain_int(name.removeprefix("epoch_").removesuffix(".pt"))


def is_intact(path: Path) -> bool:
    """True when `path` is a complete torch checkpoint archive (every member's CRC matches)."""
    try:
        with path.open("rb") as raw, zipfile.ZipFile(raw) as archive:
            members = archive.infolist()
            if not any(member.filename.endswith("data.pkl") for member in members):
                return False
            if any(member.compress_type != zipfile.ZIP_STORED for member in members):
                return archive.testzip() is None  # not torch's layout: the stdlib's own check
            buffer = memoryview(bytearray(_CHUNK))
            return all(_stored_member_sound(raw, member, buffer) for member in members)
    except (
        OSError,
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        EOFError,
        ValueError,
        RuntimeError,
        struct.error,
        zlib.error,
    ):
        # A damaged archive makes the stdlib's parser raise more than BadZipFile (a flipped
        # version byte: NotImplementedError, a RuntimeError; a damaged extra field:
        # struct.error; a damaged compressed member: zlib.error): not whole.
        return False


_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, then the name's and the extra's lengths
_CHUNK = 1 << 22
_FLAGS_REFUSED = 0x01 | 0x20 | 0x40  # encrypted, patched data, strong encryption


def _stored_member_sound(
    archive: io.BufferedReader, member: zipfile.ZipInfo, buffer: memoryview
) -> bool:
    """What `ZipFile.testzip` checks of one stored member (its local header names it, and its
    bytes, all there, have the CRC the directory says), read in large chunks: torch writes one
    member per tensor, thousands of them, and the stdlib's member-by-member reader took 2.5
    times as long on a 35 MB checkpoint (`bench/bench_checkpoint_check.py`)."""
    if member.flag_bits & _FLAGS_REFUSED or member.file_size != member.compress_size:
        return False  # as testzip refuses them; and a stored member's two sizes are one
    name = member.orig_filename.encode("utf-8" if member.flag_bits & 0x800 else "cp437")
    archive.seek(member.header_offset)
    header = archive.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size:
        return False
    signature, name_len, extra_len = _LOCAL_HEADER.unpack(header)
    if signature != b"PK\x03\x04" or name_len != len(name) or archive.read(name_len) != name:
        return False
    archive.seek(extra_len, os.SEEK_CUR)
    remaining, crc = member.compress_size, 0
    while remaining > 0:
        got = archive.readinto(buffer[: min(remaining, len(buffer))])
        if not got:
            return False  # cut short
        crc = zlib.crc32(buffer[:got], crc)
        remaining -= got
    return crc == member.CRC


# Verdicts of is_intact for files whose identity and stat have not changed since: reading every
# epoch_N.pt in full on each pass would cost gigabytes of reads an hour on a long run.
_VERDICTS: dict[tuple[str, int, int, int], bool] = {}
_VERDICTS_MAX = 4096


def is_intact_cached(path: Path) -> bool:
    try:
        st = path.stat()
    except OSError:
        return False
    key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    verdict = _VERDICTS.get(key)
    if verdict is None:
        verdict = is_intact(path)
        if len(_VERDICTS) >= _VERDICTS_MAX:
            _VERDICTS.clear()
        _VERDICTS[key] = verdict
    return verdict


@dataclass(frozen=True)
class CheckpointFile:
    relpath: str  # relative to the run folder, e.g. "weights/last.pt"
    epoch: int  # the epoch it belongs to (epoch_N.pt: N; others: the marker's epoch)
    size: int
    mtime_ns: int

    @property
    def stat(self) -> FileStat:
        return FileStat(size=self.size, mtime_ns=self.mtime_ns)


def _epoch_of(relpath: str, marker: EpochMarker) -> int:
    number = epoch_number(Path(relpath).name)
    return marker.epoch_of(relpath) if number is None else number


def _stat_or_none(path: Path) -> FileStat | None:
    try:
        return FileStat.of(path)
    except OSError:
        return None


def complete_checkpoints(run_dir: Path, control_dir: Path) -> list[CheckpointFile]:
    """The weights files the newest epoch marker vouches for that are still exactly as it saw
    them and pass the zip check; sorted by path. Empty before the first epoch ends."""
    marker = read_epoch_marker(control_dir)
    if marker is None:
        return []
    found: list[CheckpointFile] = []
    for relpath, recorded in sorted(marker.files.items()):
        path = run_dir / relpath
        if _stat_or_none(path) != recorded:
            continue  # rewritten since (or being rewritten now), or gone
        if not is_intact_cached(path):
            continue
        if _stat_or_none(path) != recorded:
            continue  # changed while we read it
        found.append(
            CheckpointFile(
                relpath=relpath,
                epoch=_epoch_of(relpath, marker),
                size=recorded.size,
                mtime_ns=recorded.mtime_ns,
            )
        )
    return found


def vouch_after_exit(run_dir: Path, control_dir: Path, now: float) -> bool:
    """With no trainer left to write, every whole checkpoint in `weights/` is complete: let the
    epoch marker vouch for them all, so a last.pt written after the last marker (a trainer that
    died, or resumed and died again) is pushed, not stranded. True when the marker changed.

    Only for a trainer known to be gone: a file still being written fails the zip check anyway.
    A file the pusher already read whole since its last write is not read again.
    """
    weights = run_dir / "weights"
    files: dict[str, FileStat] = {}
    for path in sorted(weights.glob("*.pt")) if weights.is_dir() else []:
        stat = _stat_or_none(path)
        if stat is not None and is_intact_cached(path) and _stat_or_none(path) == stat:
            files[f"weights/{path.name}"] = stat
    marker = read_epoch_marker(control_dir)
    if marker is None:
        if not files:
            return False
        marker = EpochMarker(epoch=0, total_epochs=0, epoch_seconds=0.0, validated=False, time=now)
    if files == marker.files:
        return False
    write_epoch_marker(control_dir, replace(marker, time=now, files=files))
    return True


def stage_copy(run_dir: Path, item: CheckpointFile, staged_dir: Path) -> Path | None:
    """Copy a complete checkpoint to `staged_dir/relpath`, atomically.

    Returns None (and leaves nothing behind) when the source changed or vanished before or
    during the copy, or the copy is not a sound archive: the caller tries again after the next
    epoch. A failed write (a full disk) raises OSError: it must never pass for "nothing new".
    """
    source = run_dir / item.relpath
    target = staged_dir / item.relpath
    tmp = target.with_name(f".{target.name}.partial")
    if _stat_or_none(source) != item.stat:
        return None
    try:
        src = source.open("rb")
    except FileNotFoundError:
        return None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with src, tmp.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())
        if _stat_or_none(source) != item.stat:
            return None
        if tmp.stat().st_size != item.size or not is_intact(tmp):
            return None
        os.replace(tmp, target)
        fsync_dir(target.parent)
        return target
    finally:
        tmp.unlink(missing_ok=True)


def _epoch_files_newest_first(weights_dir: Path) -> list[Path]:
    numbered: list[tuple[int, Path]] = []
    try:
        entries = list(weights_dir.iterdir())
    except OSError:
        return []
    for path in entries:
        number = epoch_number(path.name)
        if number is not None:
            numbered.append((number, path))
    return [path for _, path in sorted(numbered, reverse=True)]


def newest_intact_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint to resume from: last.pt if intact (it is written first, every epoch),
    else the newest intact weights/epoch_N.pt; None if there is none."""
    weights = run_dir / "weights"
    last = weights / "last.pt"
    if is_intact(last):
        return last
    for path in _epoch_files_newest_first(weights):
        if is_intact(path):
            return path
    return None
