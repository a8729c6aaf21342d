"""The one transition function of a run's status, and the store of run records.

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
from dataclasses import dataclass
from pathlib import Path

from runspec.clock import SYSTEM, Clock, utc_iso
from runspec.errors import RunspecError
from runspec.store.atomic import write_json_atomic
from runspec.store.entries import Fit, HistoryEntry
from runspec.store.paths import StateLayout
from runspec.store.record import (
    RECORD_SCHEMA,
    STOP_REASONS,
    DiskFull,
    PushRecord,
    Rebuilt,
    RunRecord,
    RunStatus,
    Terminal,
    Termination,
)

# The record's own types (runspec.store.record) are importable from here, as they always were.
__all__ = [
    "ALLOWED",
    "BACKWARD",
    "DAMAGED_FILE",
    "RECORD_SCHEMA",
    "STOP_REASONS",
    "UNFINISHED_END",
    "Damaged",
    "DamagedRecord",
    "DiskFull",
    "Fit",
    "HistoryEntry",
    "PushRecord",
    "Rebuilt",
    "RecordStore",
    "Reopen",
    "RunRecord",
    "RunStatus",
    "Scan",
    "Terminal",
    "Termination",
    "TransitionError",
    "move",
    "named",
    "unnamed_edges",
]

log = logging.getLogger("runspec.store.state")

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
        # An engine's attempt with nothing verified at the target starts over from its preflight
        # (runspec.run.attemptgate), whatever the attempt before it was doing when it died.
        | {(end, S.PREFLIGHT) for end in UNFINISHED_END}
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


def unnamed_edges(history: list[HistoryEntry]) -> list[HistoryEntry]:
    """The entries of a record's history whose move the table does not name."""
    return [h for h in history if not named(h.old, h.new, h.via)]


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
    entry = HistoryEntry(when, old.value, new.value, reason, via.value if via else None)
    record.history.append(entry)
    return old


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
