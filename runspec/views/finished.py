"""A finished run's summary read back from its state folder (where its weights are, its best
metric, its cost, its finish): `runspec status NAME` prints it, `runspec logs NAME` ends with
it, in the lines `runspec run` and the daemon ended the run with."""

from __future__ import annotations

from pathlib import Path

from runspec.errors import RunspecError
from runspec.spec.loader import load_accepted
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore, RunStatus
from runspec.views.report import summary_lines


def finished_summary(state: Path, name: str) -> list[str] | None:
    """The summary lines, or None while the run has not finished (or cannot be read)."""

    try:
        record = RecordStore(state).load(name)
    except RunspecError:
        return None
    if record is None or record.status is not RunStatus.FINISHED:
        return None
    paths = StateLayout(state).run_paths(name)
    try:
        spec = load_accepted(paths.spec_file)
    except RunspecError:
        return None
    return [str(line) for line in summary_lines(spec, paths, record)]
