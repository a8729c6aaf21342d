"""The queue is the record store: queued records, first come first served, and requests to
cancel a run (a file in its job folder that the daemon's loop picks up)."""

from __future__ import annotations

import os
from pathlib import Path

from runspec.atomic import write_json_atomic
from runspec.clock import Clock, utc_iso
from runspec.state import RecordStore, RunRecord, RunStatus

CANCEL_FILE = "cancel.json"


def cancel_path(state: Path, name: str) -> Path:
    return state / "jobs" / name / CANCEL_FILE


def request_cancel(state: Path, name: str, clock: Clock, by: str = "runspec cancel") -> Path:
    path = cancel_path(state, name)
    write_json_atomic(path, {"time": utc_iso(clock.time()), "by": by, "pid": os.getpid()})
    return path


def cancel_requested(state: Path, name: str) -> bool:
    return cancel_path(state, name).exists()


def clear_cancel(state: Path, name: str) -> None:
    cancel_path(state, name).unlink(missing_ok=True)


def arrival(store: RecordStore, record: RunRecord) -> tuple[str, int, str]:
    """The queue's order. queued_at has one-second resolution; ties go by when the spec was
    accepted (its copy in the job folder is written once; the folder's own ctime is not a
    creation time: it moves with every record write)."""
    try:
        accepted = (store.path(record.name).parent / "spec.yaml").stat().st_mtime_ns
    except FileNotFoundError:
        accepted = 0
    return (record.queued_at or "", accepted, record.name)


def in_flight(store: RecordStore) -> list[RunRecord]:
    """Runs a previous daemon left under way (not queued, not finished): resumed first."""
    return sorted(
        (r for r in store.all() if r.status not in (RunStatus.QUEUED, RunStatus.FINISHED)),
        key=lambda r: arrival(store, r),
    )


def queued(store: RecordStore) -> list[RunRecord]:
    return sorted(
        (r for r in store.all() if r.status is RunStatus.QUEUED),
        key=lambda r: arrival(store, r),
    )
