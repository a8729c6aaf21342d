"""A run's own finish as its record keeps it (`record.finish`), shaped like the endgame's step
in machine.json: `applying` an action (written before it is taken, so a restart never repeats
it), `applied` with its result, or `deferred` to the machine's end with why.

The record keeps the result's fields beside `step` (what `runspec status --json` and the
pushed record.json show); records written before this shape are read as the step they were.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any


class EndAction(str, enum.Enum):
    """What a finish does, once chosen: the spec's action resolved (`auto` to stop or destroy),
    or `keep` for weights not verified. Records keep it as its string."""

    NONE = "none"
    KEEP = "keep"
    COMMAND = "command"
    POWEROFF = "poweroff"
    STOP = "stop"
    DESTROY = "destroy"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def read(cls, value: object) -> EndAction | None:
        """A record's action; None when it has none or one that is none of these."""
        try:
            return cls(value) if isinstance(value, str) else None
        except ValueError:
            return None


ENDS_BILLING = frozenset({EndAction.STOP, EndAction.DESTROY})


@dataclass(frozen=True)
class FinishResult:
    requested: str  # the spec's finish.action
    action: EndAction  # what was chosen
    verified: bool
    dry_run: bool
    ok: bool  # it did what it set out to do (a dry run: it printed the plan)
    plan: str  # exactly what it was about to do, as printed
    summary: str  # one line for the record's history
    detail: str = ""
    started_at: str = ""
    seconds: float = 0.0
    provider: dict[str, Any] | None = field(default=None)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"action": self.action.value}


class FinishStep(str, enum.Enum):
    APPLYING = "applying"
    APPLIED = "applied"
    DEFERRED = "deferred"


@dataclass(frozen=True)
class FinishRecord:
    step: FinishStep
    action: EndAction | None = None
    summary: str = ""
    why: str = ""
    result: FinishResult | None = None

    @classmethod
    def applying(cls, action: EndAction) -> FinishRecord:
        return cls(FinishStep.APPLYING, action, f"{action}: under way")

    @classmethod
    def applied(cls, result: FinishResult) -> FinishRecord:
        return cls(FinishStep.APPLIED, result.action, result.summary, result.detail, result)

    @classmethod
    def deferred(cls, why: str) -> FinishRecord:
        return cls(FinishStep.DEFERRED, None, f"finish deferred to the machine's end: {why}", why)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = self.result.to_json() if self.result is not None else {}
        action = self.action.value if self.action is not None else None
        data.update(step=self.step.value, action=action, summary=self.summary, why=self.why)
        if self.step is FinishStep.DEFERRED:
            data["deferred"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FinishRecord | None:
        """None for a run whose finish has not begun."""
        if not data:
            return None
        step = data.get("step")
        if step not in {s.value for s in FinishStep}:
            step = "deferred" if data.get("deferred") else "applied" if "ok" in data else None
        if step is None:
            return None
        result = None
        action = EndAction.read(data.get("action"))
        if step == "applied" and action is not None:
            fields = FinishResult.__dataclass_fields__
            try:
                values = {k: v for k, v in data.items() if k in fields}
                result = FinishResult(**(values | {"action": action}))
            except TypeError:
                result = None
        return cls(
            FinishStep(step),
            action,
            str(data.get("summary", "")),
            str(data.get("why", "")),
            result,
        )

    @property
    def unconfirmed_end(self) -> bool:
        """Applied, asked to end the machine's billing, and never confirmed by the provider."""
        result = self.result
        if result is None or result.ok or result.dry_run:
            return False
        return result.requested in ("stop", "destroy", "auto") or result.action in ENDS_BILLING
