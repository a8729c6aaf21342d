"""Two of a run record's fields, typed: the schedule fitted to the budget (`fit`, planned by
runspec.budgetfit) and each step of its status history (`history`, written only by the
transition function, runspec.store.state.move).

Read strictly (a record is also read from a push target: outside data), and written as the same
JSON objects as ever, so records on disk and on the Hub stay readable both ways: `from_json`
raises TypeError for anything else.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Fit:
    epochs: int  # what LibreYOLO plans its schedule with
    of: int  # the spec's train.epochs
    epoch_s: float  # the profile's estimate of one training epoch's steps
    save_s: float = 0.0  # and of one checkpoint save

    @property
    def fitted(self) -> bool:
        return self.epochs < self.of

    def line(self) -> str:
        """What the preflight, status and the model card say about it."""
        if self.fitted:
            return (
                f"your {self.of} epochs do not fit: training {self.epochs}, the schedule "
                "fitted to them"
            )
        return f"all {self.of} epochs fit in the budget"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> Fit:
        """The fit as `to_json` wrote it (an older record's has no save_s), nothing else."""
        known = {"epochs", "of", "epoch_s", "save_s"}
        if not isinstance(data, dict) or not {"epochs", "of", "epoch_s"} <= set(data) <= known:
            raise TypeError(f"fit is not an object of {', '.join(sorted(known))}")
        save_s = data.get("save_s", 0.0)
        counts = _count(data["epochs"]) and _count(data["of"])
        if not counts or not (_number(data["epoch_s"]) and _number(save_s)):
            raise TypeError("fit holds a field of the wrong type")
        return cls(data["epochs"], data["of"], float(data["epoch_s"]), float(save_s))


@dataclass(frozen=True)
class HistoryEntry:
    """One move of the run's status, as the transition function made it. `old` and `new` are
    kept as written (an older runspec's rebuild wrote a status that does not exist, which
    runspec.store.state.unnamed_edges finds); `via` names a move back (Reopen)."""

    time: str  # ISO UTC
    old: str
    new: str
    reason: str
    via: str | None = None

    def to_json(self) -> dict[str, str]:
        out = {"time": self.time, "from": self.old, "to": self.new, "reason": self.reason}
        return out | ({"via": self.via} if self.via is not None else {})

    @classmethod
    def from_json(cls, data: object) -> HistoryEntry:
        names = ("time", "from", "to", "reason")
        if not isinstance(data, dict) or not set(names) <= set(data) <= {*names, "via"}:
            raise TypeError(f"a history entry is not an object of {', '.join(names)}[, via]")
        if not all(isinstance(data.get(k, ""), str) for k in (*names, "via")):
            raise TypeError("a history entry holds a field that is not a string")
        return cls(data["time"], data["from"], data["to"], data["reason"], data.get("via"))
