"""What a run and the idle machine cost: the arithmetic behind `runspec cost`, `auto`, and status.

The storage rule is the one every renter should do by hand (spec-v1.md): a stopped machine still
bills its allocated disk, stopped $/h = allocated GB x $/GB-month / 730, and stopping beats
destroying when the time until the machine is needed again, billed at that rate, costs less than
rebuilding it (the guide's 250 GB at $0.20 gives $0.0685/h and a break-even of about 14.6 h).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from runspec.clock import parse_utc_iso
from runspec.providers import PROVIDERS
from runspec.spec.model import Spec, StorageSpec
from runspec.store.entries import HistoryEntry
from runspec.store.record import RunCost
from runspec.store.state import RunRecord, RunStatus

HOURS_PER_MONTH = 730.0  # the providers' own convention (8,760 h / 12)


# While the machine is up but the GPU is not training (DESIGN.md's lifecycle).
IDLE_STATUSES = frozenset(
    {RunStatus.PREFLIGHT, RunStatus.STAGING, RunStatus.PUSHING, RunStatus.FINISHING}
)


class Choice(str, enum.Enum):
    STOP = "stop"
    DESTROY = "destroy"


def stopped_hourly(storage: StorageSpec) -> float:
    """USD per hour a stopped machine still bills for its disk."""
    return storage.allocated_gb * storage.usd_per_gb_month / HOURS_PER_MONTH


def break_even_hours(storage: StorageSpec) -> float:
    """Hours stopped after which a stop has cost as much as a rebuild."""
    per_hour = stopped_hourly(storage)
    return float("inf") if per_hour == 0 else storage.rebuild_usd / per_hour


def choose(storage: StorageSpec, provider: str | None = None) -> tuple[Choice, str]:
    """`finish.action: auto`: stop or destroy, and why, in one line."""
    adapter = PROVIDERS.get(provider or "")
    if adapter is not None and not adapter.can_stop:
        # The provider knows: a stop that saves nothing (Hetzner) or is impossible (Lambda).
        return Choice.DESTROY, f"destroy: {adapter.stop_bills}"
    per_hour = stopped_hourly(storage)
    return_h = storage.return_within / 3600
    stop_cost = return_h * per_hour
    even = break_even_hours(storage)
    if stop_cost < storage.rebuild_usd:
        return Choice.STOP, (
            f"stop: back within {return_h:g} h costs ${stop_cost:.2f} stopped "
            f"(${per_hour:.4f}/h), less than the ${storage.rebuild_usd:.2f} rebuild "
            f"(break-even {even:.1f} h)"
        )
    return Choice.DESTROY, (
        f"destroy: {return_h:g} h stopped would cost ${stop_cost:.2f} (${per_hour:.4f}/h), "
        f"at least the ${storage.rebuild_usd:.2f} rebuild (break-even {even:.1f} h)"
    )


@dataclass(frozen=True)
class Estimate:
    """`runspec cost SPEC`: what the run may cost and what the machine costs afterwards."""

    name: str
    provider: str
    running_hourly: float | None
    wall_clock_s: float
    overrun_s: float
    worst_case_usd: float | None  # wall_clock + overrun at the running rate
    stopped_hourly: float | None
    rebuild_usd: float | None
    return_within_s: float | None
    break_even_hours: float | None
    stop_cost_usd: float | None  # stopped until return_within
    advice: str | None  # "stop" | "destroy"
    reason: str
    finish_action: str

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if data["break_even_hours"] == float("inf"):
            data["break_even_hours"] = None
        return data

    def render_text(self) -> str:
        lines = [f"{self.name}: cost (finish: {self.finish_action}, provider: {self.provider})"]
        budget_h = (self.wall_clock_s + self.overrun_s) / 3600
        if self.running_hourly is None:
            lines.append("  running: unknown (set budget.hourly_cost)")
        else:
            lines.append(f"  running:      ${self.running_hourly:.4f}/h")
            lines.append(
                f"  worst case:   ${self.worst_case_usd:.2f} "
                f"(wall_clock + overrun = {budget_h:.2f} h)"
            )
        if self.stopped_hourly is None:
            lines.append("  stopped:      unknown (set finish.storage)")
        else:
            lines.append(f"  stopped:      ${self.stopped_hourly:.4f}/h (the disk only)")
            lines.append(f"  rebuild:      ${self.rebuild_usd:.2f}")
            if self.break_even_hours is not None:
                lines.append(f"  break-even:   {self.break_even_hours:.1f} h stopped")
            lines.append("  destroyed:    $0.00/h")
        lines.append(f"  advice:       {self.reason}")
        return "\n".join(lines)


def estimate(spec: Spec) -> Estimate:
    storage = spec.finish.storage
    hourly = spec.budget.hourly_cost
    worst = None
    if hourly is not None:
        worst = hourly * (spec.budget.wall_clock + spec.budget.overrun) / 3600
    provider = spec.finish.provider
    common: dict[str, Any] = {
        "name": spec.name,
        "provider": provider,
        "running_hourly": hourly,
        "wall_clock_s": spec.budget.wall_clock,
        "overrun_s": spec.budget.overrun,
        "worst_case_usd": worst,
        "finish_action": spec.finish.action.value,
    }
    if storage is None:
        return Estimate(
            **common,
            stopped_hourly=None,
            rebuild_usd=None,
            return_within_s=None,
            break_even_hours=None,
            stop_cost_usd=None,
            advice=None,
            reason="no finish.storage figures: cannot compare stop with destroy",
        )
    choice, reason = choose(storage, provider)
    per_hour = stopped_hourly(storage)
    return Estimate(
        **common,
        stopped_hourly=per_hour,
        rebuild_usd=storage.rebuild_usd,
        return_within_s=storage.return_within,
        break_even_hours=break_even_hours(storage),
        stop_cost_usd=per_hour * storage.return_within / 3600,
        advice=choice.value,
        reason=reason,
    )


def usd_text(usd: float, hourly_cost: float) -> str:
    """The run's cost as the card and the summary both write it."""
    return f"${usd:.4f} at ${hourly_cost}/h"


def settled_cost(record: RunRecord, hourly_cost: float | None, now: float) -> RunCost:
    """The cost reckoned once, at the final push, and kept in the record: the figure the model
    card carries, so the summary and `status` say the same number; until then, as of `now`."""
    return record.cost or run_cost(record, hourly_cost, now)


def run_cost(record: RunRecord, hourly_cost: float | None, now: float) -> RunCost:
    """Billed from the run's start to its end (or `now` while it runs) at the hourly cost.

    GPU-idle seconds are the time spent in preflight, staging, the final push and the finish,
    read from the record's status history.
    """
    if record.started_at is None:
        return RunCost(0.0, None if hourly_cost is None else 0.0, 0.0, {})
    start = parse_utc_iso(record.started_at)
    end = parse_utc_iso(record.ended_at) if record.ended_at else now
    billed = max(0.0, end - start)
    idle = _time_in_statuses(record.history, start, end, IDLE_STATUSES)
    usd = None if hourly_cost is None else billed / 3600 * hourly_cost
    return RunCost(billed, usd, sum(idle.values()), idle)


def _time_in_statuses(
    history: Iterable[HistoryEntry],
    start: float,
    end: float,
    statuses: frozenset[RunStatus],
) -> dict[str, float]:
    """Seconds spent in each of `statuses`, each status lasting until the next transition."""
    steps: list[tuple[float, str]] = []
    for entry in history:
        try:
            steps.append((parse_utc_iso(entry.time), entry.new))
        except (ValueError, OverflowError):  # a pushed record's time that is no time
            continue
    steps.sort(key=lambda step: step[0])
    wanted = {s.value for s in statuses}
    spent: dict[str, float] = {}
    for i, (t, status) in enumerate(steps):
        if status not in wanted:
            continue
        until = steps[i + 1][0] if i + 1 < len(steps) else end
        lo, hi = max(t, start), min(until, end)
        if hi > lo:
            spent[status] = spent.get(status, 0.0) + hi - lo
    return spent
