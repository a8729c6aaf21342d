"""What a verified push says, in one line."""

from __future__ import annotations

from runspec.clock import human_duration
from runspec.push.base import StagedFile
from runspec.push.manifest import Manifest
from runspec.store.state import PushRecord
from runspec.units import format_bytes


def pushed_line(
    pushed: PushRecord, manifest: Manifest, uploads: list[StagedFile], where: str
) -> str:
    at = f" (commit {pushed.commit[:10]})" if pushed.commit else ""
    what = f"epoch {manifest.epoch}" if manifest.epoch is not None else "run files"
    final = " (final)" if manifest.final else ""
    # The count the summary gives (every file the target now holds for this push, the
    # manifest included) and the bytes of the files it lists (the weights' with the run's
    # files), then what went out this time when less did: an unchanged best.pt stays put.
    count, held = len(pushed.files), sum(entry.size for entry in manifest.entries)
    went = ""
    if len(uploads) != count:
        went = f" ({len(uploads)} sent, {format_bytes(pushed.bytes)})"
    return (
        f"pushed {what}{final} to {where}: {count} files, {format_bytes(held)}{went} in "
        f"{human_duration(pushed.seconds)}, verified{at}"
    )
