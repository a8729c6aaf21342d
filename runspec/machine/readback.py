"""Read-back is machine-wide: a destroy ends every run's disk, not only the disk of the run that
asked for it, so before any destroy every run's newest verified weights are read back from
their targets, whatever each run's own finish asked for (issue 19.4).

A run whose verified push was read back already (its `pushed.json` says so) is not read again;
a run whose weights do not read back makes the destroy fall back to the unverified choice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from runspec.errors import RunspecError
from runspec.push import make_target
from runspec.push.manifest import Manifest
from runspec.spec.loader import load_accepted
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore


def unread(layout: StateLayout, say: Callable[[str], None]) -> str | None:
    """Read back each run's verified weights not read back yet; None when all match, else
    why the machine may not be destroyed."""
    for record in RecordStore(layout.state).scan().records:
        paths = layout.run_paths(record.name)
        manifest = Manifest.load(paths.pushed_manifest)
        if manifest is None or manifest.read_back:
            continue  # nothing verified (the verdict judged that), or read back already
        weights = [e for e in manifest.entries if e.path.startswith("weights/")]
        if not weights:
            continue
        try:
            spec = load_accepted(paths.spec_file)
            if spec.push is None:
                continue
            commit = record.last_push.commit if record.last_push is not None else None
            problems = make_target(spec, paths).read_back(commit, weights)
        except (RunspecError, OSError, ValueError) as exc:
            problems = [str(exc)]
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            return f"run {record.name}'s weights do not read back: {problems[0]}{more}"
        dataclasses.replace(manifest, read_back=True).write(paths.pushed_manifest)
        say(f"read back run {record.name}'s {len(weights)} weights files: the bytes match")
    return None
