"""The closing summary a person reads when a run ends."""

from __future__ import annotations

from runspec.clock import human_duration, parse_utc_iso
from runspec.model import Spec
from runspec.state import RunRecord
from runspec.units import format_bytes


def phase_times(record: RunRecord) -> dict[str, float]:
    """Wall seconds per status, from the record's history of transitions."""
    spans: dict[str, float] = {}
    history = record.history
    for before, after in zip(history, history[1:], strict=False):
        seconds = parse_utc_iso(after["time"]) - parse_utc_iso(before["time"])
        spans[before["to"]] = spans.get(before["to"], 0.0) + seconds
    return spans


def billed_seconds(record: RunRecord) -> float:
    if not record.started_at or not record.ended_at:
        return 0.0
    return parse_utc_iso(record.ended_at) - parse_utc_iso(record.started_at)


def idle_seconds(record: RunRecord) -> float:
    """Seconds the GPU had nothing to do: preflight, staging, the final push, the finish."""
    spans = phase_times(record)
    return sum(spans.get(s, 0.0) for s in ("preflight", "staging", "pushing", "finishing"))


def summary_lines(spec: Spec, record: RunRecord) -> list[str]:
    term = record.termination.value if record.termination else record.status.value
    lines = [f"run {record.name}: {term} after epoch {record.epoch}/{record.total_epochs}"]
    if record.reason:
        lines.append(f"  why: {record.reason}")
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
    billed = billed_seconds(record)
    idle = idle_seconds(record)
    cost = ""
    if spec.budget.hourly_cost is not None:
        cost = f", ${billed / 3600 * spec.budget.hourly_cost:.4f} at ${spec.budget.hourly_cost}/h"
    lines.append(f"  time: {human_duration(billed)} billed{cost}; GPU idle {idle:.0f} s")
    if record.finish:
        lines.append(f"  finish: {record.finish.get('summary', record.finish)}")
    return lines
