"""The queue is the record store: queued records, first come first served, and requests to
cancel a run (a file in its job folder that whoever drives the run picks up)."""

from __future__ import annotations

import os

from runspec.clock import Clock, utc_iso
from runspec.store.atomic import write_json_atomic
from runspec.store.paths import RunPaths
from runspec.store.room import is_unwritable
from runspec.store.state import RecordStore, RunRecord, RunStatus


def request_cancel(paths: RunPaths, clock: Clock, by: str = "runspec cancel") -> None:
    write_json_atomic(
        paths.cancel_file, {"time": utc_iso(clock.time()), "by": by, "pid": os.getpid()}
    )


def clear_cancel(paths: RunPaths) -> None:
    try:
        paths.cancel_file.unlink(missing_ok=True)
    except OSError as exc:
        if not is_unwritable(exc):
            raise
        # A read-only state folder: the request stays; it is only ever read for a live run.


def arrival(store: RecordStore, record: RunRecord) -> tuple[str, int, str]:
    """The queue's order. queued_at has one-second resolution; ties go by when the spec was
    accepted (its copy in the job folder is written once; the folder's own ctime is not a
    creation time: it moves with every record write)."""
    try:
        accepted = store.layout.spec_file(record.name).stat().st_mtime_ns
    except FileNotFoundError:
        accepted = 0
    return (record.queued_at or "", accepted, record.name)


def in_flight(store: RecordStore, records: list[RunRecord] | None = None) -> list[RunRecord]:
    """Runs a previous daemon left under way (not queued, not finished): resumed first."""
    found = store.all() if records is None else records
    return sorted(
        (r for r in found if r.status not in (RunStatus.QUEUED, RunStatus.FINISHED)),
        key=lambda r: arrival(store, r),
    )


def queued(store: RecordStore, records: list[RunRecord] | None = None) -> list[RunRecord]:
    found = store.all() if records is None else records
    return sorted(
        (r for r in found if r.status is RunStatus.QUEUED),
        key=lambda r: arrival(store, r),
    )
