"""Writing files so a reader (another process, a restart after a crash) sees the old file or
the new one, never a torn one: a temp name beside the target, fsync, rename, fsync the folder.

The temp name starts with a dot and ends in `.tmp`, which the daemon's inbox ignores. Stdlib
only: the trainer and the daemon both use it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def fsync_dir(path: Path) -> None:
    """Make a rename inside `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_text(path: Path, text: str, mode: int | None = None) -> None:
    write_bytes(path, text.encode(), mode)


def write_json_atomic(path: Path, data: Any, mode: int = 0o600) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n", mode)
