"""The closing summary a person reads when a run ends."""

from __future__ import annotations

from runspec.clock import SYSTEM, Clock, human_duration
from runspec.cost import run_cost
from runspec.model import Spec
from runspec.state import RunRecord
from runspec.units import format_bytes


def summary_lines(spec: Spec, record: RunRecord, clock: Clock = SYSTEM) -> list[str]:
    term = record.termination.value if record.termination else record.status.value
    lines = [f"run {record.name}: {term} after epoch {record.epoch}/{record.total_epochs}"]
    if record.why:
        lines.append(f"  why: {record.why}")
    push = record.last_push
    if spec.push is None:
        lines.append("  pushed: nothing (the spec has no push section)")
    elif push is None:
        lines.append("  pushed: NOTHING VERIFIED: the weights exist only on this machine")
    else:
        where = spec.push.hub.repo if spec.push.hub else str(spec.push.dir)
        final = "final push" if push.final else "last push (NOT the final one)"
        lines.append(
            f"  verified {final}: epoch {push.epoch}, {len(push.files)} files, "
            f"{format_bytes(push.bytes)} to {where} at {push.time}"
        )
    cost = run_cost(record, spec.budget.hourly_cost, clock.time())
    usd = "" if cost.usd is None else f", ${cost.usd:.4f} at ${spec.budget.hourly_cost}/h"
    lines.append(
        f"  time: {human_duration(cost.billed_s)} billed{usd}; "
        f"GPU idle {cost.gpu_idle_s:.0f} s (preflight, staging, final push, finish)"
    )
    if record.finish:
        lines.append(f"  finish: {record.finish.get('summary', record.finish)}")
    return lines
