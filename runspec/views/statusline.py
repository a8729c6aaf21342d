"""The one-line summary systemd shows (`STATUS=`) and `--once` prints."""

from __future__ import annotations

from runspec.clock import human_duration, parse_utc_iso
from runspec.state import RunRecord, RunStatus


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


def summary(record: RunRecord) -> str:
    """The closing line `--once` prints for a run that ended."""
    ended = record.termination.value if record.termination else "ended"
    push = record.last_push
    pushed = "nothing pushed"
    if push is not None:
        final = " (final)" if push.final else ""
        pushed = f"last verified push: epoch {push.epoch}, {len(push.files)} files{final}"
    cost_text = ""
    usd, billed = record.cost.get("usd"), record.cost.get("billed_s")
    if isinstance(usd, int | float) and isinstance(billed, int | float):
        idle = record.cost.get("gpu_idle_s") or 0
        cost_text = (
            f", {human_duration(billed)} billed, ${usd:.4f} at the spec's rate, "
            f"GPU idle {human_duration(idle)}"
        )
    finish = record.finish.get("summary") or record.finish.get("action") or "none"
    return (
        f"summary {record.name}: {ended}, epoch {record.epoch}/{record.total_epochs}, "
        f"{pushed}{cost_text}, finish: {finish}"
    )
