"""One check's result, shared by everything that checks before the meter matters: the preflight's
checks (runspec.preflight) and each push target's own check of its target (runspec.push), so
neither imports the other for it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runspec.errors import Cause


class CheckStatus(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: CheckStatus
    message: str
    fix: str = ""  # one line saying what to do; empty when there is nothing to do
    # Measured figures the run goes on with (the profile's epoch: runspec.budgetfit).
    figures: dict[str, float] = field(default_factory=dict)
    # A failure that is this machine's (a GPU, its link), set by the check that found it.
    cause: Cause | None = None
    # A failure for want of the network (the Hub out of reach): another try may pass, so it
    # never marks a run terminal.
    transient: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "status": self.status.value,
            "message": self.message,
            "fix": self.fix,
        }
        if self.figures:
            data["figures"] = dict(self.figures)
        if self.cause is not None:
            data["cause"] = self.cause.value
        if self.transient:
            data["transient"] = True
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CheckResult:
        return cls(
            name=str(data["name"]),
            status=CheckStatus(data["status"]),
            message=str(data.get("message", "")),
            fix=str(data.get("fix", "")),
            figures=_figures(data.get("figures")),
            cause=Cause(data["cause"]) if data.get("cause") is not None else None,
            transient=data.get("transient") is True,
        )


def _figures(data: object) -> dict[str, float]:
    if not isinstance(data, dict):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float)}


def passed(name: str, message: str) -> CheckResult:
    return CheckResult(name, CheckStatus.PASS, message)


def warned(name: str, message: str, fix: str) -> CheckResult:
    return CheckResult(name, CheckStatus.WARN, message, fix)


def failed(name: str, message: str, fix: str, cause: Cause | None = None) -> CheckResult:
    return CheckResult(name, CheckStatus.FAIL, message, fix, cause=cause)
