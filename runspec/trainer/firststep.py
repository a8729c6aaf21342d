"""Time to first step: from the spec's arrival to LibreYOLO's first training step.

The billed minutes before it train nothing (the queue, the preflight, staging, the model's
build and LibreYOLO's setup). The trainer notes the moment LibreYOLO's `on_train_start` fires
(its setup done, the first batch next) in the control folder, once per run: a resumed trainer
keeps the first note. `runspec status`, the closing summary and the bench read it back.
"""

from __future__ import annotations

from pathlib import Path

from runspec.clock import parse_utc_iso, utc_iso
from runspec.store.atomic import write_text
from runspec.store.state import RunRecord

FIRST_STEP_FILE = "first_step"  # in the control folder: one UTC ISO time


def note(control_dir: Path, now: float) -> None:
    path = control_dir / FIRST_STEP_FILE
    if not path.exists():
        write_text(path, utc_iso(now) + "\n")


def first_step_at(control_dir: Path) -> float | None:
    try:
        return parse_utc_iso((control_dir / FIRST_STEP_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def time_to_first_step(record: RunRecord, control_dir: Path) -> float | None:
    """Seconds from the spec's arrival (queued_at) to the first step; None before it."""
    at = first_step_at(control_dir)
    if at is None or not record.queued_at:
        return None
    return max(0.0, at - parse_utc_iso(record.queued_at))
