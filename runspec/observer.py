"""Read a LibreYOLO run folder as it is written: how far training got, how it is going, and
whether it ended. Never imports torch.

`status.json` is advisory: LibreYOLO leaves `running` in it forever when killed, so `running`
with no live trainer means killed. `metrics.jsonl` repeats epochs after a resume (it is not
trimmed), so rows are deduplicated by epoch, the last one winning.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runspec import control


class ObservedState(str, enum.Enum):
    RUNNING = "running"
    COMPLETED = "completed"
    STOPPED = "stopped"  # ended at an epoch boundary on request or at the deadline
    FAILED = "failed"
    KILLED = "killed"  # status says running but no trainer is alive
    MISSING = "missing"  # no status.json and no trainer


@dataclass(frozen=True)
class Observation:
    state: ObservedState
    completed_epochs: int = 0
    total_epochs: int = 0
    eta_seconds: float | None = None
    best_metric: float | None = None
    best_metric_name: str = ""
    train_loss: float | None = None
    error: str = ""  # "Type: message" when failed
    epochs: list[dict[str, Any]] = field(default_factory=list)


def _read_status(run_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_epochs(run_dir: Path) -> list[dict[str, Any]]:
    """metrics.jsonl rows, one per epoch (the last row for an epoch wins), by epoch."""
    rows: dict[int, dict[str, Any]] = {}
    try:
        text = (run_dir / "metrics.jsonl").read_text()
    except OSError:
        return []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line being written right now
        if isinstance(row, dict) and isinstance(row.get("epoch"), int):
            rows[row["epoch"]] = row
    return [rows[epoch] for epoch in sorted(rows)]


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _eta(epochs: list[dict[str, Any]], completed: int, total: int) -> float | None:
    times = [t for t in (_float(row.get("time")) for row in epochs[-5:]) if t is not None]
    if not times or total <= 0:
        return None
    return max(total - completed, 0) * (sum(times) / len(times))


def observe(run_dir: Path, control_dir: Path, alive: bool) -> Observation:
    """What the run folder says now; `alive` is whether the trainer process still runs."""
    status = _read_status(run_dir)
    epochs = read_epochs(run_dir)
    marker = control.read_epoch_marker(control_dir)
    completed = epochs[-1]["epoch"] if epochs else 0
    total = 0
    if status is not None:
        total = int(status.get("total_epochs") or 0)
        if not epochs:
            completed = int(status.get("current_epoch") or 0)
    if marker is not None:
        total = total or marker.total_epochs
    last = epochs[-1] if epochs else {}

    error = ""
    raw = status.get("state") if status is not None else None
    if alive:
        state = ObservedState.RUNNING
    elif raw == "completed":
        state = ObservedState.COMPLETED
    elif raw == "failed":
        err = status.get("error") if status is not None else None
        err = err if isinstance(err, dict) else {}
        error = f"{err.get('type', 'Error')}: {err.get('message', '')}".rstrip(": ")
        # The callback leaves a note when it ended training on purpose.
        if control.stopping_reason(control_dir) is not None or err.get("type") in (
            "TrainingStopped",
            "StopRequested",
        ):
            state, error = ObservedState.STOPPED, ""
        else:
            state = ObservedState.FAILED
    elif raw == "running":
        state = ObservedState.KILLED
    else:
        state = ObservedState.MISSING

    return Observation(
        state=state,
        completed_epochs=completed,
        total_epochs=total,
        eta_seconds=_eta(epochs, completed, total) if state == ObservedState.RUNNING else None,
        best_metric=_float(last.get("best_metric")),
        best_metric_name=str(last.get("best_metric_name") or ""),
        train_loss=_float(last.get("train/loss")),
        error=error,
        epochs=epochs,
    )
