"""`<state>/machine.json`: the machine's end armed, and how far it got (written atomically).

The endgame (runspec.machine.endgame) is its one writer; each step is saved before it is taken, with
every provider attempt, so an entry after any restart goes on from the last one.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from runspec.clock import Clock, utc_iso
from runspec.spec.model import FinishSpec
from runspec.store.atomic import write_json_atomic
from runspec.store.finishrecord import EndAction
from runspec.store.paths import StateLayout
from runspec.store.room import is_unwritable

log = logging.getLogger("runspec.machine.endgame")

MACHINE_SCHEMA = 1
HISTORY_MAX = 50

Step = Literal["armed", "applying", "applied"]


@dataclass
class Pending:
    """A machine-ending finish waiting to be applied, and how far it got."""

    run: str
    finish: FinishSpec
    hourly_cost: float | None
    weights: str
    why: str
    armed_at: str
    step: Step = "armed"
    action: EndAction | None = None  # chosen when applying began
    verified: bool | None = None
    judged: str = ""
    result: dict[str, Any] | None = None
    force_unverified: bool = False  # a command finish whose run is unverified: its fallback
    until: float | None = None  # when a provider's end stops retrying (set when applying began)
    attempts: list[dict[str, Any]] = field(default_factory=list)  # each provider request

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["finish"] = self.finish.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Pending:
        values = dict(data)
        values["finish"] = FinishSpec.from_json(values["finish"])
        values["action"] = EndAction.read(values.get("action"))
        return cls(**values)


# The pending end a read-only state folder refused, by machine file: this process goes on from
# it (an arm, then its enter, each of a new Endgame) and writes it once the folder takes it.
# No other writer can exist while the folder is read-only.
_UNSAVED: dict[Path, Pending | None] = {}


def load_pending(layout: StateLayout) -> Pending | None:
    if layout.machine_file in _UNSAVED:
        return _UNSAVED[layout.machine_file]
    try:
        data = json.loads(layout.machine_file.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        # Never guess at a half-known machine end: a damaged file is set aside and said.
        log.error("machine.json is unreadable (%s); it is ignored", exc)
        return None
    try:
        pending = data.get("pending") if isinstance(data, dict) else None
        return Pending.from_json(pending) if isinstance(pending, dict) else None
    except (KeyError, TypeError, ValueError) as exc:
        log.error("machine.json holds no readable pending finish (%s); it is ignored", exc)
        return None


def _history(layout: StateLayout) -> list[dict[str, str]]:
    try:
        data = json.loads(layout.machine_file.read_text())
        history = data.get("history", [])
        return history if isinstance(history, list) else []
    except (OSError, ValueError, AttributeError):
        return []


def save_pending(layout: StateLayout, pending: Pending | None, event: str, clock: Clock) -> None:
    history = [*_history(layout), {"time": utc_iso(clock.time()), "event": event}]
    data = {
        "schema": MACHINE_SCHEMA,
        "pending": pending.to_json() if pending is not None else None,
        "history": history[-HISTORY_MAX:],
    }
    try:
        write_json_atomic(layout.machine_file, data)
    except OSError as exc:
        if is_unwritable(exc):
            _UNSAVED[layout.machine_file] = pending
        raise
    _UNSAVED.pop(layout.machine_file, None)
    log.info("machine: %s", event)


def resumable(pending: Pending, armed: FinishSpec) -> bool:
    """Whether the failsafe may finish an end machine.json says was under way. machine.json
    lies where a trainer may write it (a container without CAP_SYS_ADMIN): a command is run
    only when the spec the failsafe was armed with (its sha256 checked) names that command."""
    if pending.finish.command and pending.finish.command != armed.command:
        log.warning("failsafe: machine.json names a command the armed spec does not: not run")
        return False
    return True
