"""A run's persisted record, its status and how it ended, and the one transition function.

The record is plain JSON under the state folder, written atomically (temp file, fsync, rename),
so a daemon killed at any moment finds a whole record on restart. A record something else
damaged (bad bytes, truncated, empty, the wrong schema) is never a crash: `load` raises
`DamagedRecord`, and whoever owns the state folder sets it aside (`set_aside`) so the other
runs go on. Only the run's owner writes it (runspec.store.owner).
"""

from __future__ import annotations

import enum
import json
import logging
import threading
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from runspec.clock import SYSTEM, Clock, utc_iso
from runspec.errors import Cause, RunspecError
from runspec.store.atomic import write_json_atomic
from runspec.store.paths import StateLayout

log = logging.getLogger("runspec.store.state")


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


# How a trainer that stopped on request ended, by the reason written into the control folder.
STOP_REASONS = {
    "budget": Termination.BUDGET,
    "deadline": Termination.BUDGET,
    "cancel": Termination.CANCELLED,
    "interrupt": Termination.INTERRUPTED,
}


S = RunStatus
ALLOWED: dict[RunStatus, frozenset[RunStatus]] = {
    S.QUEUED: frozenset({S.PREFLIGHT, S.FINISHED}),
    S.PREFLIGHT: frozenset({S.STAGING, S.PUSHING, S.FINISHED}),
    S.STAGING: frozenset({S.TRAINING, S.PUSHING, S.FINISHED}),
    S.TRAINING: frozenset({S.STOPPING, S.PUSHING}),
    S.STOPPING: frozenset({S.PUSHING}),
    S.PUSHING: frozenset({S.FINISHING, S.FINISHED}),
    S.FINISHING: frozenset({S.FINISHED}),
    # Only forward: a finish deferred to the machine's end belongs to runspec.machine.endgame, not
    # to a finished run's status.
    S.FINISHED: frozenset(),
}


class Reopen(str, enum.Enum):
    """The moves back, each named for what makes it; only a transition that names one may
    take it, and its history entry says which (`via`)."""

    RESUME = "resume"  # `--resume`: back to the preflight or the training, or its end goes on
    REFINISH = "refinish"  # `runspec push --finish`: a finished run back to its finish
    REBUILD = "rebuild"  # a damaged record under a live trainer, rebuilt (runspec.run.rebuild)


# A final push or finish under way when its driver stopped: a resume lets it go on first.
UNFINISHED_END = frozenset({S.PUSHING, S.FINISHING})
BACKWARD: dict[Reopen, frozenset[tuple[RunStatus, RunStatus]]] = {
    Reopen.RESUME: frozenset(
        {(old, new) for old in S if old not in UNFINISHED_END for new in (S.PREFLIGHT, S.TRAINING)}
        | {(end, end) for end in UNFINISHED_END}
    ),
    Reopen.REFINISH: frozenset({(S.FINISHED, S.FINISHING)}),
    # A rebuilt record starts anew (queued) and takes up the training its trainer is in.
    Reopen.REBUILD: frozenset({(S.QUEUED, S.TRAINING)}),
}


def named(old: str, new: str, via: str | None = None) -> bool:
    """Whether the table names the move `old -> new` (by `via`, for a move back)."""
    try:
        edge = (RunStatus(old), RunStatus(new))
        return edge in BACKWARD[Reopen(via)] if via else edge[1] in ALLOWED[edge[0]]
    except ValueError:
        return False


def unnamed_edges(history: list[dict[str, str]]) -> list[dict[str, str]]:
    """The entries of a record's history whose move the table does not name."""
    return [h for h in history if not named(h.get("from", ""), h.get("to", ""), h.get("via"))]


def move(
    record: RunRecord,
    new: RunStatus,
    reason: str,
    now: float,
    termination: Termination | None = None,
    via: Reopen | None = None,
) -> RunStatus:
    """Check the move and make it in `record` (nothing saved: RecordStore.transition saves;
    a record being built, not yet saved, moves with this alone). Returns the old status."""
    old = record.status
    if not named(old.value, new.value, via.value if via else None):
        how = f" (by {via.value})" if via else ""
        raise TransitionError(f"run {record.name}: {old.value} -> {new.value}{how} is not allowed")
    record.status = new
    if termination is not None:
        record.termination = termination
        record.why = reason
    when = utc_iso(now)
    record.ended_at = when if new is RunStatus.FINISHED else None
    record.reason = reason
    entry = {"time": when, "from": old.value, "to": new.value, "reason": reason}
    record.history.append(entry | ({"via": via.value} if via else {}))
    return old


RECORD_SCHEMA = 1  # the record.json format this runspec writes and reads


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
    # A failure that was this machine's, decided where it was caught: an engine's retry (75).
    cause: Cause | None = None
    reason: str = ""  # the reason of the latest transition
    queued_at: str | None = None
    started_at: str | None = None  # the run's first start (UTC); the budget counts from here
    # ... unless a resume gave it a new budget (runspec.run.resume): then from here.
    budget_started_at: str | None = None
    deadline: str | None = None  # started_at + wall_clock (UTC); survives restarts
    ended_at: str | None = None
    # run_dir is no field: paths.json says where the run folder is (an older record's copy
    # is ignored as it is read).
    data_yaml: str | None = None  # the staged dataset, so a re-attached run can resume
    epoch: int = 0
    total_epochs: int = 0
    restarts_used: int = 0
    last_push: PushRecord | None = None
    push_error: str | None = None
    finish: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, Any] = field(default_factory=dict)
    # Set while a write failed for want of space: {"path", "needed", "since"}; None otherwise.
    disk_full: dict[str, Any] | None = None
    # The schedule fitted to the budget (runspec.budgetfit.Fit); None: train.epochs stands.
    fit: dict[str, Any] | None = None
    history: list[dict[str, str]] = field(default_factory=list)
    # The spec rules (runspec.spec.rules.RULES_VERSION) it was accepted under; None: before 1.
    spec_rules: int | None = None
    # A permanent failure (a missing dataset, a spec LibreYOLO refuses): {"reason", "at"}.
    # Pushed with the record, so no resume (here or on a fresh machine) tries it again.
    terminal: dict[str, Any] | None = None
    resumes: int = 0  # how often `--resume` continued it
    # Set when this record was rebuilt from the job folder's other files because record.json
    # was damaged under a live trainer (runspec.run.rebuild): {"reason", "kept_as", "at"}.
    # Such a run is never trusted for a destroy.
    rebuilt: dict[str, Any] | None = None
    schema: int = RECORD_SCHEMA

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        data["termination"] = self.termination.value if self.termination else None
        data["cause"] = self.cause.value if self.cause else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        """Raises ValueError, TypeError or KeyError for anything that is not a record."""
        if not isinstance(data, dict):
            raise TypeError(f"a record is a JSON object, not {type(data).__name__}")
        schema = data.get("schema", RECORD_SCHEMA)
        if schema != RECORD_SCHEMA:
            raise ValueError(f"record schema {schema!r}; this runspec reads {RECORD_SCHEMA}")
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        for key in ("name", "spec_sha256"):
            if not isinstance(kwargs.get(key), str) or not kwargs[key]:
                raise KeyError(f"the record has no {key}")
        kwargs["status"] = RunStatus(kwargs.get("status", "queued"))
        term = kwargs.get("termination")
        kwargs["termination"] = Termination(term) if term else None
        kwargs["cause"] = Cause(kwargs["cause"]) if kwargs.get("cause") else None
        if kwargs.get("last_push"):
            kwargs["last_push"] = PushRecord(**kwargs["last_push"])
        counts = ("epoch", "total_epochs", "restarts_used", "resumes")
        for key, kind in ((name, int) for name in counts):
            if not isinstance(kwargs.get(key, 0), kind):
                raise TypeError(f"{key} is not an integer")
        for key in ("finish", "cost"):
            if not isinstance(kwargs.get(key, {}), dict):
                raise TypeError(f"{key} is not an object")
        for key in ("fit", "terminal", "rebuilt"):
            if not isinstance(kwargs.get(key), dict | None):
                raise TypeError(f"{key} is not an object")
        if not isinstance(kwargs.get("history", []), list):
            raise TypeError("history is not a list")
        return cls(**kwargs)


class TransitionError(RunspecError):
    pass


class DamagedRecord(RunspecError):
    """A record.json that cannot be read as a record."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason
        super().__init__(f"run {name}: its record is damaged ({reason})")


@dataclass(frozen=True)
class Damaged:
    """A run set aside because its record was damaged: shown by `runspec status`, and no
    machine-ending finish is applied while one exists."""

    name: str
    reason: str
    kept_as: str  # the damaged file's new name beside it ("" until it was set aside)
    time: str


DAMAGED_FILE = "damaged.json"


@dataclass(frozen=True)
class Scan:
    records: list[RunRecord]
    damaged: list[Damaged]


class RecordStore:
    """Run records under `<state>/jobs/<name>/record.json`."""

    def __init__(self, state_dir: Path, clock: Clock = SYSTEM) -> None:
        self.state_dir = state_dir
        self.layout = StateLayout(state_dir)
        self.clock = clock
        # The lifecycle and the pusher's worker both save the same record.
        self._lock = threading.RLock()

    def path(self, name: str) -> Path:
        return self.layout.record_file(name)

    def load(self, name: str) -> RunRecord | None:
        """The record, None when there is none; DamagedRecord when it cannot be read."""
        path = self.path(name)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise DamagedRecord(name, f"unreadable: {exc.strerror or exc}") from exc
        try:
            record = RunRecord.from_json(json.loads(raw.decode("utf-8")))
        except (ValueError, TypeError, KeyError) as exc:
            what = "empty" if not raw.strip() else f"{type(exc).__name__}: {exc}"
            raise DamagedRecord(name, what[:200]) from exc
        if record.name != name:
            raise DamagedRecord(name, f"it names another run ({record.name!r})")
        return record

    def save(self, record: RunRecord) -> None:
        with self._lock:
            write_json_atomic(self.path(record.name), record.to_json())

    def damaged(self, name: str) -> Damaged | None:
        """The run's damage note, when it was set aside."""
        try:
            data = json.loads((self.layout.job_dir(name) / DAMAGED_FILE).read_text())
            return Damaged(name, str(data["reason"]), str(data["kept_as"]), str(data["time"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def scan(self) -> Scan:
        """Every record that reads, and every run that is damaged (set aside or not)."""
        records: list[RunRecord] = []
        damaged: list[Damaged] = []
        for name in self.layout.names():
            try:
                record = self.load(name)
            except DamagedRecord as exc:
                damaged.append(Damaged(name, exc.reason, "", utc_iso(self.clock.time())))
                continue
            if record is not None:
                records.append(record)
            elif (note := self.damaged(name)) is not None:
                damaged.append(note)
        return Scan(records, damaged)

    def all(self) -> list[RunRecord]:
        return self.scan().records

    def set_aside(self, name: str, reason: str) -> Damaged:
        """Keep a damaged record beside it under another name, and note why: the run is then
        neither resumed nor overwritten (only the owner of the state folder calls this)."""
        now = utc_iso(self.clock.time())
        stamp = now.replace(":", "").replace("+0000", "Z")
        source = self.path(name)
        kept = source.with_name(f"record.damaged-{stamp}.json")
        try:
            source.rename(kept)
        except FileNotFoundError:
            kept = source
        note = Damaged(name, reason, kept.name, now)
        write_json_atomic(
            self.layout.job_dir(name) / DAMAGED_FILE,
            {"reason": reason, "kept_as": kept.name, "time": now},
        )
        # Whoever set it aside tells people (the daemon, as an error line).
        log.debug("run %s: its record is damaged (%s); kept as %s", name, reason, kept)
        return note

    def transition(
        self,
        record: RunRecord,
        new: RunStatus,
        reason: str,
        termination: Termination | None = None,
        via: Reopen | None = None,
    ) -> None:
        """The only way a status changes: check the move, log it, persist it. A move back
        names what makes it (`via`), and the table must name that move."""
        old = move(record, new, reason, self.clock.time(), termination, via)
        how = f" by {via.value}" if via else ""
        log.info("%s: %s -> %s%s (%s)", record.name, old.value, new.value, how, reason)
        self.save(record)
