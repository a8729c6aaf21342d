"""The one-line status systemd shows (`STATUS=`)."""

from __future__ import annotations

from runspec.clock import human_duration, parse_utc_iso
from runspec.store.state import RunRecord, RunStatus


def describe(record: RunRecord | None, now: float, queued: int) -> str:
    waiting = f", {queued} queued" if queued else ""
    if record is None:
        return f"idle{waiting}" if not queued else f"{queued} queued"
    parts = [f"{record.status.value} {record.name}"]
    if record.status in (RunStatus.TRAINING, RunStatus.STOPPING) and record.total_epochs:
        parts[0] += f" epoch {record.epoch}/{record.total_epochs}"
    if record.deadline:
        left = parse_utc_iso(record.deadline) - now
        parts.append(f"{human_duration(left)} left" if left > 0 else "past its deadline")
    if record.last_push is not None:
        epoch = record.last_push.epoch
        parts.append(f"last push epoch {epoch}" if epoch is not None else "pushed")
    if record.push_error:
        parts.append("push failing")
    return ", ".join(parts) + waiting
