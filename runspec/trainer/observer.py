"""Read a LibreYOLO run folder as it is written: how far training got and how it is going.
Never imports torch.

How training ended is the trainer's own word (runspec.trainer.control's result.json), not this:
`status.json` is advisory (LibreYOLO leaves `running` in it forever when killed).
`metrics.jsonl` repeats epochs after a resume (it is not trimmed), so rows are deduplicated by
epoch, the last one winning.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runspec.trainer import control


@dataclass(frozen=True)
class Observation:
    completed_epochs: int = 0
    total_epochs: int = 0
    eta_seconds: float | None = None
    best_metric: float | None = None
    best_metric_name: str = ""
    train_loss: float | None = None
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


def observe(run_dir: Path, control_dir: Path) -> Observation:
    """What the run folder says now."""
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
    return Observation(
        completed_epochs=completed,
        total_epochs=total,
        eta_seconds=_eta(epochs, completed, total),
        best_metric=_float(last.get("best_metric")),
        best_metric_name=str(last.get("best_metric_name") or ""),
        train_loss=_float(last.get("train/loss")),
        epochs=epochs,
    )
