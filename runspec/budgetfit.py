"""The schedule fitted to the budget (`budget.fit: epochs`).

LibreYOLO plans its whole schedule from `epochs` when training starts: the learning rate's
warmup and decay (libreyolo/training/scheduler.py: each scheduler's `total_iters` is
`iters_per_epoch * total_epochs`) and the final `no_aug_epochs` without mosaic
(trainer.py: `no_aug_start = epochs - no_aug_epochs`). A budget that stops training at epoch 40
of 100 leaves the learning rate high and that last phase never run. So when the preflight's
profile says the budget cannot hold `train.epochs`, the trainer is given the epochs that fit
instead, and LibreYOLO's own schedule ends at the last epoch trained.

Only at the start. A callback gets frozen events (the config a read-only copy) and no handle on
the trainer, and the epoch loop's range is fixed when the loop begins: re-planning mid-run
would mean forking LibreYOLO. A resume keeps the fitted count (it is in the run record), and
the budget's stop at an epoch boundary stays the guard when the estimate was short.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from runspec.budget import (
    FINISH_SECONDS,
    MARGIN_S,
    MIN_RESERVE_S,
    VALIDATION_FACTOR,
    eval_interval_of,
    validates,
)
from runspec.spec.model import BudgetFit, Spec
from runspec.store.state import RunRecord

# The profile times a few training steps: real epochs add the loader's start, the checkpoint
# saves and a slower first epoch. Epochs are planned this much longer than measured. Small on
# purpose, because the two ways of being wrong cost the same: a margin too large forfeits a
# whole epoch every time the profile was right (at 1 % an 8 h run of 9-minute epochs trained
# 51 instead of 52: bench/bench_budget_share.py), while a profile too short by more than the
# margin loses at most the plan's last epoch to the budget's stop, which guards that case.
# Epoch noise averages out over a run (1 % per epoch is 0.14 % over 52 epochs).
FIT_MARGIN = 0.003
# A validating epoch as the fit counts it: validation runs inference only, on a val split
# usually a tenth of the training images or less. (The planner's VALIDATION_FACTOR is its
# cautious bound before it has timed a validating epoch; for the whole run's plan it would
# forfeit half an epoch per validation.)
FIT_VALIDATION_FACTOR = 1.1
# From the fit to the first step: the trainer's imports, the model's build, LibreYOLO's setup.
TRAINER_START_S = 30.0
PROFILE_FIGURE = "epoch_seconds"  # the profile check's figure the fit is planned from


@dataclass(frozen=True)
class Fit:
    epochs: int  # what LibreYOLO plans its schedule with
    of: int  # the spec's train.epochs
    epoch_s: float  # the profile's estimate of one training epoch

    @property
    def fitted(self) -> bool:
        return self.epochs < self.of

    def line(self) -> str:
        """What the preflight, status and the model card say about it."""
        if self.fitted:
            return (
                f"your {self.of} epochs do not fit: training {self.epochs}, the schedule "
                "fitted to them"
            )
        return f"all {self.of} epochs fit in the budget"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> Fit | None:
        if not isinstance(data, dict):
            return None
        try:
            return cls(int(data["epochs"]), int(data["of"]), float(data["epoch_s"]))
        except (KeyError, TypeError, ValueError):
            return None


def end_reserve(spec: Spec) -> float:
    """Seconds the end needs before the measured pushes exist: the spec's reserve, else the
    planner's floor for it (runspec.budget)."""
    floor = max(MIN_RESERVE_S, FINISH_SECONDS[spec.finish.action] + MARGIN_S)
    return spec.budget.reserve if spec.budget.reserve is not None else floor


def seconds_for(epochs: int, epoch_s: float, eval_interval: int, margin: float) -> float:
    """How long `epochs` epochs take as the budget's stop judges them, with the margin.

    Validating epochs are FIT_VALIDATION_FACTOR times a plain one, except the last when no
    epoch before it validated: the trainer's stop rule then predicts it from plain epochs
    alone (runspec.budget: VALIDATION_FACTOR times the longest), and the fit must leave that
    room, or the budget cuts the schedule's very last epoch.
    """
    total = 0.0
    seen_validating = False
    for epoch in range(1, epochs + 1):
        factor = 1.0
        if validates(epoch, epochs, eval_interval):
            last_unseen = epoch == epochs and not seen_validating
            factor = VALIDATION_FACTOR if last_unseen else FIT_VALIDATION_FACTOR
            seen_validating = True
        total += epoch_s * factor
    return total * (1.0 + margin)


def epochs_in(spec: Spec, epoch_s: float, seconds_left: float, margin: float = FIT_MARGIN) -> int:
    """The most epochs (at most train.epochs) that end before the end's reserve."""
    if epoch_s <= 0:
        return spec.train.epochs
    usable = seconds_left - TRAINER_START_S - end_reserve(spec)
    interval = eval_interval_of(spec)
    epochs = spec.train.epochs
    # From the top down: each count has its own validating last epoch.
    while epochs > 0 and seconds_for(epochs, epoch_s, interval, margin) > usable:
        epochs -= 1
    return epochs


def plan(spec: Spec, epoch_s: float | None, seconds_left: float) -> Fit | None:
    """The fit for a run with `seconds_left` of its budget; None when nothing is fitted (fit:
    none, no profile figure, or not even one epoch fits: the budget's stop then says so)."""
    if spec.budget.fit is BudgetFit.NONE or epoch_s is None or epoch_s <= 0:
        return None
    epochs = epochs_in(spec, epoch_s, seconds_left)
    if epochs < 1:
        return None
    return Fit(epochs=epochs, of=spec.train.epochs, epoch_s=epoch_s)


def of_record(record: RunRecord) -> Fit | None:
    return Fit.from_json(record.fit)


def planned_epochs(spec: Spec, record: RunRecord) -> int:
    """The epochs the trainer is told: the fitted count, else the spec's."""
    fit = of_record(record)
    return fit.epochs if fit is not None else spec.train.epochs
