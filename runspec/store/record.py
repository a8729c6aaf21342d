"""A run's record: its status, how it ended, and every field `record.json` keeps.

Plain JSON, read strictly: `RunRecord.from_json` raises ValueError, TypeError or KeyError for
anything that is not a record (runspec.store.state turns that into DamagedRecord). A record is
also read from a push target (runspec.run.resume), so every field is checked as outside data.
The status changes only through runspec.store.state's transition.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from runspec.errors import Cause
from runspec.store.entries import Fit, HistoryEntry
from runspec.store.finishrecord import FinishRecord


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


@dataclass(frozen=True)
class Terminal:
    """A permanent failure (a missing dataset, a spec LibreYOLO refuses): pushed with the
    record, so no resume (here or on a fresh machine) tries it again."""

    reason: str
    at: str

    @classmethod
    def from_json(cls, data: object) -> Terminal:
        return cls(**_strings(data, "terminal", ("reason", "at")))


@dataclass(frozen=True)
class Rebuilt:
    """A record rebuilt from its job folder's other files because record.json was damaged
    under a live trainer (runspec.run.rebuild): such a run is never trusted for a destroy."""

    reason: str
    kept_as: str  # the damaged file's name beside it
    at: str

    @classmethod
    def from_json(cls, data: object) -> Rebuilt:
        return cls(**_strings(data, "rebuilt", ("reason", "kept_as", "at")))


@dataclass(frozen=True)
class RunCost:
    """After (or during) a run: billed wall time, its cost, and the GPU's idle part of it."""

    billed_s: float
    usd: float | None
    gpu_idle_s: float
    idle_by_status: Mapping[str, float]

    def to_json(self) -> dict[str, Any]:
        return {
            "billed_s": round(self.billed_s, 1),
            "usd": None if self.usd is None else round(self.usd, 4),
            "gpu_idle_s": round(self.gpu_idle_s, 1),
            "idle_by_status": {k: round(v, 1) for k, v in self.idle_by_status.items()},
        }

    @classmethod
    def from_json(cls, data: object) -> RunCost:
        """The cost as `to_json` wrote it (an older record's may lack the idle figures), and
        nothing else (TypeError)."""
        known = {"billed_s", "usd", "gpu_idle_s", "idle_by_status"}
        if not isinstance(data, dict) or not {"billed_s", "usd"} <= set(data) <= known:
            raise TypeError(f"cost is not an object of {', '.join(sorted(known))}")
        usd, idle = data["usd"], data.get("idle_by_status", {})
        numbers = [data["billed_s"], data.get("gpu_idle_s", 0.0)]
        numbers += idle.values() if isinstance(idle, dict) else [None]
        if not all(_number(n) for n in numbers) or not (usd is None or _number(usd)):
            raise TypeError("cost holds a field that is not a number")
        return cls(
            float(data["billed_s"]),
            None if usd is None else float(usd),
            float(data.get("gpu_idle_s", 0.0)),
            {str(k): float(v) for k, v in idle.items()},
        )


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class DiskFull:
    """Set while a write failed for want of space (the record's own, a staged checkpoint, the
    trainer's), cleared when space is back."""

    path: str
    needed: int | str  # bytes, or in words ("a few kilobytes for the run's record")
    free: int | None  # bytes free when it was seen; None: unknown
    since: str
    what: str = ""  # what could not be written, in words

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> DiskFull:
        if not isinstance(data, dict) or not {"path", "needed", "since"} <= set(data):
            raise TypeError("disk_full is not an object of path, needed, since")
        free, needed = data.get("free"), data["needed"]
        ok = isinstance(needed, int | str) and (free is None or isinstance(free, int))
        if not ok or not all(isinstance(data.get(k, ""), str) for k in ("path", "since", "what")):
            raise TypeError("disk_full holds a field of the wrong type")
        return cls(data["path"], needed, free, data["since"], data.get("what", ""))


def _strings(data: object, key: str, names: tuple[str, ...]) -> dict[str, str]:
    """The named string fields of an object, and no others (TypeError otherwise)."""
    if not isinstance(data, dict) or set(data) != set(names):
        raise TypeError(f"{key} is not an object of {', '.join(names)}")
    if not all(isinstance(data[name], str) for name in names):
        raise TypeError(f"{key} holds a field that is not a string")
    return {name: data[name] for name in names}


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
    finish: FinishRecord | None = None  # how far its own finish got (runspec.machine.endgame)
    cost: RunCost | None = None  # reckoned once, at the final push (runspec.cost)
    disk_full: DiskFull | None = None  # set while a write failed for want of space
    fit: Fit | None = None  # the schedule fitted to the budget; None: train.epochs stands
    history: list[HistoryEntry] = field(default_factory=list)  # only store.state.move adds
    # The spec rules (runspec.spec.rules.RULES_VERSION) it was accepted under; None: before 1.
    spec_rules: int | None = None
    terminal: Terminal | None = None  # a permanent failure: never resumed
    resumes: int = 0  # how often `--resume` continued it
    rebuilt: Rebuilt | None = None  # rebuilt from its job folder: never trusted for a destroy
    schema: int = RECORD_SCHEMA

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        data["termination"] = self.termination.value if self.termination else None
        data["cause"] = self.cause.value if self.cause else None
        data["finish"] = self.finish.to_json() if self.finish is not None else {}
        data["cost"] = self.cost.to_json() if self.cost is not None else {}
        data["fit"] = self.fit.to_json() if self.fit is not None else None
        data["history"] = [entry.to_json() for entry in self.history]
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
        kwargs["finish"] = FinishRecord.from_json(kwargs.get("finish") or {})
        kwargs["cost"] = RunCost.from_json(kwargs["cost"]) if kwargs.get("cost") else None
        kwargs["fit"] = Fit.from_json(kwargs["fit"]) if kwargs.get("fit") is not None else None
        marks: tuple[tuple[str, Any], ...] = (
            ("terminal", Terminal),
            ("rebuilt", Rebuilt),
            ("disk_full", DiskFull),
        )
        for key, mark in marks:
            if kwargs.get(key) is not None:
                kwargs[key] = mark.from_json(kwargs[key])
        if not isinstance(kwargs.get("history", []), list):
            raise TypeError("history is not a list")
        kwargs["history"] = [HistoryEntry.from_json(h) for h in kwargs.get("history", [])]
        return cls(**kwargs)
