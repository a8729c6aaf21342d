"""A run's persisted record, its status and how it ended, and the one transition function.

The record is plain JSON under the state folder, written atomically (temp file, fsync, rename),
so a daemon killed at any moment finds a whole record on restart.
"""

from __future__ import annotations

import enum
import json
import logging
import threading
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from runspec.atomic import write_json_atomic
from runspec.clock import SYSTEM, Clock, utc_iso
from runspec.errors import RunspecError

log = logging.getLogger("runspec.state")


class RunStatus(str, enum.Enum):
    QUEUED = "queued"
    PREFLIGHT = "preflight"
    STAGING = "staging"
    TRAINING = "training"
    STOPPING = "stopping"
    PUSHING = "pushing"
    FINISHING = "finishing"
    FINISHED = "finished"


class Termination(str, enum.Enum):
    """How a run ended, kept apart from its status."""

    COMPLETED = "completed"
    CANCELLED = "cancelled"
    BUDGET = "budget"
    INTERRUPTED = "interrupted"  # SIGTERM/SIGINT to `runspec run`, or a system shutdown
    FAILED_PREFLIGHT = "failed-preflight"
    FAILED_STAGING = "failed-staging"
    FAILED_TRAINING = "failed-training"
    LOST = "lost"  # the trainer died and no restart was left


S = RunStatus
ALLOWED: dict[RunStatus, frozenset[RunStatus]] = {
    S.QUEUED: frozenset({S.PREFLIGHT, S.FINISHED}),
    S.PREFLIGHT: frozenset({S.STAGING, S.PUSHING, S.FINISHED}),
    S.STAGING: frozenset({S.TRAINING, S.PUSHING, S.FINISHED}),
    S.TRAINING: frozenset({S.STOPPING, S.PUSHING}),
    S.STOPPING: frozenset({S.PUSHING}),
    S.PUSHING: frozenset({S.FINISHING, S.FINISHED}),
    S.FINISHING: frozenset({S.FINISHED}),
    S.FINISHED: frozenset({S.FINISHING}),  # a finish deferred while other specs were queued
}


@dataclass
class PushRecord:
    """The last verified push: only this counts for the finish action."""

    epoch: int | None
    time: str
    commit: str | None
    files: list[str]
    bytes: int = 0
    seconds: float = 0.0
    final: bool = False


@dataclass
class RunRecord:
    name: str
    spec_sha256: str
    status: RunStatus = RunStatus.QUEUED
    termination: Termination | None = None
    why: str = ""  # why it ended, in a person's words (set with the termination)
    reason: str = ""  # the reason of the latest transition
    queued_at: str | None = None
    started_at: str | None = None  # the budget's clock starts here (UTC)
    deadline: str | None = None  # started_at + wall_clock (UTC); survives restarts
    ended_at: str | None = None
    run_dir: str | None = None
    data_yaml: str | None = None  # the staged dataset, so a re-attached run can resume
    epoch: int = 0
    total_epochs: int = 0
    restarts_used: int = 0
    last_push: PushRecord | None = None
    push_error: str | None = None
    finish: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        data["termination"] = self.termination.value if self.termination else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["status"] = RunStatus(kwargs.get("status", "queued"))
        term = kwargs.get("termination")
        kwargs["termination"] = Termination(term) if term else None
        if kwargs.get("last_push"):
            kwargs["last_push"] = PushRecord(**kwargs["last_push"])
        return cls(**kwargs)


class TransitionError(RunspecError):
    pass


class RecordStore:
    """Run records under `<state>/jobs/<name>/record.json`."""

    def __init__(self, state_dir: Path, clock: Clock = SYSTEM) -> None:
        self.state_dir = state_dir
        self.clock = clock
        # The lifecycle and the pusher's worker both save the same record.
        self._lock = threading.RLock()

    def path(self, name: str) -> Path:
        return self.state_dir / "jobs" / name / "record.json"

    def load(self, name: str) -> RunRecord | None:
        try:
            data = json.loads(self.path(name).read_text())
        except FileNotFoundError:
            return None
        return RunRecord.from_json(data)

    def save(self, record: RunRecord) -> None:
        with self._lock:
            write_json_atomic(self.path(record.name), record.to_json())

    def all(self) -> list[RunRecord]:
        jobs = self.state_dir / "jobs"
        if not jobs.is_dir():
            return []
        records = [self.load(p.name) for p in sorted(jobs.iterdir()) if p.is_dir()]
        return [r for r in records if r is not None]

    def transition(
        self,
        record: RunRecord,
        new: RunStatus,
        reason: str,
        termination: Termination | None = None,
    ) -> None:
        """The only way a status changes: check the move, log it, persist it."""
        old = record.status
        if new not in ALLOWED[old]:
            raise TransitionError(f"run {record.name}: {old.value} -> {new.value} is not allowed")
        record.status = new
        if termination is not None:
            record.termination = termination
            record.why = reason
        now = utc_iso(self.clock.time())
        if new is RunStatus.FINISHED:
            record.ended_at = now
        record.reason = reason
        record.history.append({"time": now, "from": old.value, "to": new.value, "reason": reason})
        log.info("%s: %s -> %s (%s)", record.name, old.value, new.value, reason)
        self.save(record)
