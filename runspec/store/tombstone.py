"""What `runspec rm --force` leaves of a run whose newest weights were not verified off the
machine: a tombstone in `<state>/retired/` naming the files left behind and where they are.

The record goes (its name is free again), but the machine's verdict still counts the files: a
destroy would wipe them, so the machine is never destroyed while any of them is still on the
disk as it was when the run was retired. A file since deleted or rewritten no longer holds
that run's weights, and no longer counts.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from runspec.clock import SYSTEM, Clock, utc_iso
from runspec.store.atomic import write_json_atomic
from runspec.store.paths import StateLayout

log = logging.getLogger("runspec.store.tombstone")

SCHEMA = 1


@dataclass(frozen=True)
class Tombstone:
    name: str
    run_dir: str
    why: str
    time: str
    files: dict[str, tuple[int, int]]  # absolute path -> (size, mtime_ns) when retired

    def to_json(self) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "name": self.name,
            "run_dir": self.run_dir,
            "why": self.why,
            "time": self.time,
            "files": {path: list(stat) for path, stat in sorted(self.files.items())},
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Tombstone:
        files = data.get("files")
        if not isinstance(files, dict):
            raise ValueError("no files")
        return cls(
            name=str(data["name"]),
            run_dir=str(data["run_dir"]),
            why=str(data.get("why", "")),
            time=str(data.get("time", "")),
            files={str(p): (int(s[0]), int(s[1])) for p, s in files.items()},
        )

    def still_here(self) -> list[str]:
        """The files left behind that are still on this disk, unchanged."""
        here = []
        for path, (size, mtime_ns) in self.files.items():
            try:
                st = os.stat(path)
            except OSError:
                continue
            if (st.st_size, st.st_mtime_ns) == (size, mtime_ns):
                here.append(path)
        return sorted(here)


def local_files(run_dir: Path, rels: list[str]) -> dict[str, tuple[int, int]]:
    """Every checkpoint in `weights/` and each of `rels`, as (size, mtime_ns) by absolute path."""
    wanted = set(rels)
    weights = run_dir / "weights"
    if weights.is_dir():
        wanted.update(f"weights/{p.name}" for p in weights.glob("*.pt"))
    found: dict[str, tuple[int, int]] = {}
    for rel in sorted(wanted):
        path = run_dir / rel
        try:
            st = path.stat()
        except OSError:
            continue
        found[str(path.absolute())] = (st.st_size, st.st_mtime_ns)
    return found


def bury(
    layout: StateLayout,
    name: str,
    run_dir: Path,
    files: dict[str, tuple[int, int]],
    why: str,
    clock: Clock = SYSTEM,
) -> Path:
    """Write the tombstone (before the record goes: a crash between leaves both, never none)."""
    stamp = utc_iso(clock.time()).replace(":", "")
    path = layout.retired / f"{name}.{stamp}.json"
    stone = Tombstone(name, str(run_dir.absolute()), why, utc_iso(clock.time()), files)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, stone.to_json(), mode=0o644)
    return path


def unsafe_retired(layout: StateLayout) -> list[str]:
    """Why each retired run's weights still stand in the way of a destroy."""
    try:
        stones = sorted(layout.retired.glob("*.json"))
    except OSError:
        return []
    reasons = []
    for path in stones:
        try:
            stone = Tombstone.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            # Never guess a retired run safe: a tombstone that cannot be read counts as unsafe.
            reasons.append(f"the tombstone {path} cannot be read ({exc})")
            continue
        here = stone.still_here()
        if here:
            reasons.append(
                f"run {stone.name} was retired with --force while {len(here)} of its files "
                f"were not verified off this machine; they are still in {stone.run_dir}"
            )
    return reasons
