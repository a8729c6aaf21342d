"""What the preflight found: one result per check, as text for people and JSON for programs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runspec.checkresult import CheckResult, CheckStatus
from runspec.clock import human_duration
from runspec.errors import Cause
from runspec.voice import ERROR, INFO, WARNING, Said

# The checks whose failure is the spec's or the dataset's, not this machine's.
PERMANENT_CHECKS = frozenset({"dataset", "data.yaml", "notify"})


@dataclass(frozen=True)
class PreflightReport:
    phase: str
    checks: list[CheckResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return any(c.status is CheckStatus.FAIL for c in self.checks)

    def figure(self, key: str) -> float | None:
        """A figure a check measured, where one did."""
        found = [c.figures[key] for c in self.checks if key in c.figures]
        return found[0] if found else None

    @property
    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status is CheckStatus.FAIL]

    @property
    def permanent(self) -> bool:
        """Whether every failure is one no fresh machine can mend: the dataset, its data.yaml
        or a notify URL the spec names, and none of them for want of the network."""
        return bool(self.failures) and all(
            c.name in PERMANENT_CHECKS and not c.transient for c in self.failures
        )

    @property
    def cause(self) -> Cause | None:
        """The first failure's cause when it is this machine's (the run's reason is that one)."""
        return self.failures[0].cause if self.failures else None

    def first_failure(self) -> str:
        """The first failed check and its fix, in one line (a run's termination reason)."""
        for check in self.failures:
            fix = f" ({check.fix})" if check.fix else ""
            return f"{check.name}: {check.message}{fix}"
        return "a check failed"

    def reason(self) -> str:
        """One line for the run's status: the failed checks and their messages."""
        return "; ".join(f"{c.name}: {c.message}" for c in self.failures)

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "failed": self.failed,
            "seconds": round(self.seconds, 3),
            "checks": [c.to_json() for c in self.checks],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PreflightReport:
        return cls(
            phase=str(data.get("phase", "")),
            checks=[CheckResult.from_json(c) for c in data.get("checks", [])],
            seconds=float(data.get("seconds", 0.0)),
        )

    def render_text(self) -> str:
        """Every check, for `runspec preflight`."""
        lines = [line for c in self.checks for line in _check_lines(c)]
        return "\n".join([*lines, self._counts()])

    def said(self) -> list[Said]:
        """What a run's progress says: the warnings and failures, each with its priority (the
        journal files them), then one line naming the checks that passed."""
        lines = [
            Said(line, _PRIORITY[c.status])
            for c in self.checks
            if c.status is not CheckStatus.PASS
            for line in _check_lines(c)
        ]
        passed_names = [c.name for c in self.checks if c.status is CheckStatus.PASS]
        names = f" ({', '.join(passed_names)})" if passed_names else ""
        return [*lines, Said(self._counts(names))]

    def _counts(self, names: str = "") -> str:
        counts = {s: sum(1 for c in self.checks if c.status is s) for s in CheckStatus}
        return (
            f"preflight ({self.phase}): {counts[CheckStatus.PASS]} passed{names}, "
            f"{counts[CheckStatus.WARN]} warned, {counts[CheckStatus.FAIL]} failed "
            f"in {human_duration(self.seconds)}"
        )


_PRIORITY = {CheckStatus.PASS: INFO, CheckStatus.WARN: WARNING, CheckStatus.FAIL: ERROR}


def _check_lines(c: CheckResult) -> list[str]:
    lines = [f"{c.status.value.upper():4}  {c.name}: {c.message}"]
    if c.fix and c.status is not CheckStatus.PASS:
        lines.append(f"      fix: {c.fix}")
    return lines
