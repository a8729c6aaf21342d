"""The line a run says at each epoch's end: how it trains, how long is left, where the budget
cuts it."""

from __future__ import annotations

from runspec.clock import human_duration
from runspec.trainer.observer import Observation


def metric_name(name: str) -> str:
    """`metrics/mAP50-95` as people read it: `mAP50-95`."""
    return name.removeprefix("metrics/") or "metric"


def epoch_line(
    epoch: int, total: int, obs: Observation, budget_left: float, budget_stops_at: int | None
) -> str:
    parts = [f"epoch {epoch}/{total}"]
    if obs.train_loss is not None:
        parts.append(f"loss {obs.train_loss:.4g}")
    if obs.best_metric is not None:
        parts.append(f"best {metric_name(obs.best_metric_name)} {obs.best_metric:.4g}")
    if obs.eta_seconds is not None and budget_stops_at is None:
        parts.append(f"ETA {human_duration(obs.eta_seconds)}")
    parts.append(f"budget left {human_duration(budget_left)}")
    if budget_stops_at is not None:
        parts.append(f"the budget stops it at about epoch {budget_stops_at} of {total}")
    return "  ".join(parts)
