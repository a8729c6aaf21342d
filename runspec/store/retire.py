"""What `runspec rm` does besides deleting the record: the run folder it keeps is moved out of
the name's way, and a rejected inbox entry can be cleared by its file name.

A kept run folder left at `runs/NAME` made every later run of NAME refuse to start ("already
holds another run's files"), so `rm` did not free the name it promised to free. Moved beside
itself as `NAME.removed-<UTC time>`, the old weights stay on the disk and the name is free.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from runspec.errors import UsageError
from runspec.store.paths import rejected_dir


def aside_name(run_dir: Path, when: float) -> Path:
    """Where a kept run folder goes: `<name>.removed-<stamp>` beside it, a name not yet taken.
    The caller renames it there (in the same folder: never a copy, never across filesystems)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))
    for n in range(1000):
        dest = run_dir.with_name(f"{run_dir.name}.removed-{stamp}{f'-{n}' if n else ''}")
        if not dest.exists() and not dest.is_symlink():
            return dest
    raise UsageError(f"cannot find a free name beside {run_dir} to move it to")


def rejected_entry(inbox: Path, file_name: str) -> list[Path]:
    """The rejected inbox entry `file_name` and its `.error` that are there ([] when none);
    a name with a folder in it is never one (rm must not delete outside rejected/)."""
    if not file_name or "/" in file_name or "\0" in file_name or file_name in (".", ".."):
        return []
    folder = rejected_dir(inbox)
    found = [folder / file_name, folder / f"{file_name}.error"]
    return [p for p in found if p.exists() or p.is_symlink()]


def clear(paths: list[Path]) -> None:
    for path in paths:
        # A rejected folder (named like a spec) goes whole; a link goes itself, never its target.
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
