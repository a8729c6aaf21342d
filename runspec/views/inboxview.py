"""What `runspec status` shows of the inbox, read from the folder alone (no daemon needed):
specs waiting to be taken, and specs the daemon refused, each with the reason it gave
(`<inbox>/rejected/NAME` and `NAME.error` beside it, in the validation format)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runspec.clock import utc_iso
from runspec.store.paths import rejected_dir

RECENT_S = 24 * 3600.0  # rejections older than this show only with --all
ERROR_SUFFIX = ".error"
SUFFIXES = (".yaml", ".yml")
READ_LIMIT = 64 * 1024  # an .error file is a few lines; never read more of one


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except OSError:
        return []


def waiting(inbox: Path) -> list[dict[str, Any]]:
    """Specs in the inbox not yet taken by the daemon, oldest first."""
    rows = []
    for entry in _entries(inbox):
        if entry.name.startswith(".") or not entry.name.endswith(SUFFIXES):
            continue
        try:
            since = entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        rows.append({"name": entry.name, "status": "waiting", "since": utc_iso(since)})
    return sorted(rows, key=lambda r: (r["since"], r["name"]))


def ignored(inbox: Path) -> list[str]:
    """The inbox's files the daemon never takes as specs (a spec.json, notes.txt, a .YAML):
    said, so a spec dropped under the wrong name does not wait there unseen."""
    names = []
    for entry in _entries(inbox):
        if entry.name.startswith(".") or entry.name.endswith(SUFFIXES):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                continue  # the daemon's own folders (rejected/, claimed/)
        except OSError:
            continue
        names.append(entry.name)
    return sorted(names)


def _reason(error_file: Path) -> tuple[str, int]:
    """The first problem line of an `.error` file, and how many there are."""
    try:
        with error_file.open("rb") as fh:
            text = fh.read(READ_LIMIT).decode("utf-8", errors="replace")
    except OSError as exc:
        return f"(its .error cannot be read: {exc.strerror or exc})", 1
    lines = [line for line in text.splitlines() if line.strip()]
    return (lines[0] if lines else "(no reason recorded)"), len(lines)


def rejected(inbox: Path, now: float, everything: bool) -> list[dict[str, Any]]:
    """Specs the daemon refused, newest first; only the last day's unless `everything`."""
    folder = rejected_dir(inbox)
    rows = []
    for entry in _entries(folder):
        if not entry.name.endswith(ERROR_SUFFIX):
            continue
        try:
            when = entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        if not everything and now - when > RECENT_S:
            continue
        name = entry.name.removesuffix(ERROR_SUFFIX)
        reason, count = _reason(folder / entry.name)
        rows.append(
            {
                "name": name,
                "status": "rejected",
                "time": utc_iso(when),
                "reason": reason,
                "problems": count,
                "file": str(folder / name),
            }
        )
    return sorted(rows, key=lambda r: (r["time"], r["name"]), reverse=True)
