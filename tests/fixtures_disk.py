"""A small filesystem that really fills: a size-limited tmpfs, mounted for one test.

Disks fill on rented machines; the tests that show what runspec does then need a real ENOSPC,
not a mocked one. Mounting needs root (CI runs as root); elsewhere these tests skip, saying so.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SmallFs = Callable[[int], Path]


def fill(path: Path, leave: int = 0) -> Path:
    """A file taking all but `leave` bytes of the free space on path's filesystem."""
    filler = path / ".filler"
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    with filler.open("wb") as fh:
        fh.truncate(0)
        chunk = b"\0" * (1 << 20)
        left = max(free - leave, 0)
        while left > 0:
            try:
                fh.write(chunk[: min(left, len(chunk))])
                fh.flush()
            except OSError:
                break
            left -= len(chunk)
    return filler


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[SmallFs]:
    mounted: list[Path] = []

    def mount(size_mb: int) -> Path:
        if os.geteuid() != 0:
            pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
        where = tmp_path / f"smallfs{len(mounted)}"
        where.mkdir()
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", str(where)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)
