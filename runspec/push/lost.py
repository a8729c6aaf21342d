"""Files verified before that the target no longer has (a repo deleted, a folder emptied)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from runspec.push.base import StagedFile
from runspec.push.collect import Stager
from runspec.push.manifest import Manifest


def forget_lost(
    verified: Manifest | None,
    verified_file: Path,
    stager: Stager,
    manifest: Manifest,
    uploads: list[StagedFile],
    problems: list[str],
    say: Callable[[str], None],
) -> Manifest | None:
    """The verified manifest without the files the target lost (written to `verified_file`),
    so the next push sends them again from the local copy and the verdict no longer counts
    them as off the machine meanwhile; the same manifest when it lost none."""
    sent = {item.entry.path for item in uploads}
    lost = {
        e.path
        for e in manifest.entries
        if e.path not in sent and any(p.startswith(f"{e.path}: ") for p in problems)
    }
    if not lost or verified is None:
        return verified
    kept = tuple(e for e in verified.entries if e.path not in lost)
    verified = dataclasses.replace(verified, entries=kept, read_back=False)
    verified.write(verified_file)
    stager.forget(lost)
    say(f"the target lost {len(lost)} verified files; they are sent again")
    return verified
