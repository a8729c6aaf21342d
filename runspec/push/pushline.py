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
    # manifest included), and how many of them went out this time when fewer did.
    count = len(pushed.files)
    went = f" ({len(uploads)} sent)" if len(uploads) != count else ""
    return (
        f"pushed {what}{final} to {where}: {count} files{went}, "
        f"{format_bytes(pushed.bytes)} in {human_duration(pushed.seconds)}, verified{at}"
    )
