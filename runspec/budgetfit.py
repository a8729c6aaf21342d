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

from collections.abc import Callable

from runspec.budget import (
    DEFAULT_UPLOAD_RATE,
    FINISH_SECONDS,
    VALIDATION_FACTOR,
    auto_reserve,
    eval_interval_of,
    validates,
)
from runspec.spec.model import BudgetFit, Spec
from runspec.store.entries import Fit
from runspec.store.state import RunRecord

# The profile times a few training steps and one checkpoint save: real epochs add the loader's
# start and a slower first epoch. Epochs are planned this much longer than measured. Small on
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
# From the fit to the first step: the trainer's imports, the model's build, LibreYOLO's setup;
# the profile measures its own (START_FIGURE), this is the figure without one.
TRAINER_START_S = 30.0
# The profile check's figures the fit is planned from (runspec.preflight.profile).
PROFILE_FIGURE = "epoch_seconds"  # one training epoch's steps
SAVE_FIGURE = "checkpoint_seconds"  # one checkpoint save (LibreYOLO's last.pt, best.pt, ...)
BYTES_FIGURE = "checkpoint_bytes"  # one checkpoint's size: the final push sends two
LEFT_FIGURE = "seconds_left"  # the budget left when the profile planned: one count said
START_FIGURE = "start_seconds"  # from the profile child's start to its last profiled step
# The files the final push sends at the end of a validating last epoch: last.pt and best.pt.
FINAL_CHECKPOINTS = 2


def end_reserve(spec: Spec, checkpoint_bytes: int = 0) -> float:
    """Seconds the end needs before the measured pushes exist: the spec's reserve, else what
    the planner keeps for the final push of the last epoch's checkpoints at its default rate
    and the finish (runspec.budget.auto_reserve): the trainer stops at that reserve."""
    if spec.budget.reserve is not None:
        return spec.budget.reserve
    pending = FINAL_CHECKPOINTS * checkpoint_bytes if spec.push is not None else 0
    return auto_reserve(pending, DEFAULT_UPLOAD_RATE, FINISH_SECONDS[spec.finish.action])


def seconds_for(
    epochs: int,
    epoch_s: float,
    eval_interval: int,
    margin: float,
    save_s: float = 0.0,
    save_period: int = 0,
) -> float:
    """How long `epochs` epochs take as the budget's stop judges them, with the margin.

    The stop times an epoch from one epoch's end to the next: its steps and the checkpoints
    LibreYOLO saves at its end (trainer.py `_save_checkpoint`: last.pt every epoch, best.pt
    after a validation that improved, counted as every one, epoch_N.pt each `save_period`).
    Validating epochs' steps are FIT_VALIDATION_FACTOR times a plain one's, except the last
    when no epoch before it validated: the trainer's stop rule then predicts it from plain
    epochs alone (runspec.budget: VALIDATION_FACTOR times the longest), and the fit must leave
    that room, or the budget cuts the schedule's very last epoch.
    """
    plain = epoch_s + save_s
    total = 0.0
    seen_validating = False
    for epoch in range(1, epochs + 1):
        length = plain
        if validates(epoch, epochs, eval_interval):
            length = epoch_s * FIT_VALIDATION_FACTOR + 2 * save_s
            if epoch == epochs and not seen_validating:
                length = max(length, plain * VALIDATION_FACTOR)
            seen_validating = True
        if save_period > 0 and epoch % save_period == 0:
            length += save_s
        total += length
    return total * (1.0 + margin)


def epochs_in(
    spec: Spec,
    epoch_s: float,
    seconds_left: float,
    margin: float = FIT_MARGIN,
    save_s: float = 0.0,
    checkpoint_bytes: int = 0,
    start_s: float = TRAINER_START_S,
) -> int:
    """The most epochs (at most train.epochs) that end before the end's reserve."""
    if epoch_s <= 0:
        return spec.train.epochs
    usable = seconds_left - start_s - end_reserve(spec, checkpoint_bytes)
    interval = eval_interval_of(spec)
    period = spec.train.save_period or 0
    epochs = spec.train.epochs

    def over(count: int) -> bool:
        return seconds_for(count, epoch_s, interval, margin, save_s, period) > usable

    # The time grows with the count (each count has its own validating last epoch): the
    # largest count that fits, by halving.
    if not over(epochs):
        return epochs
    low, high = 0, epochs  # low fits (or is 0), high does not
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if over(middle) else (middle, high)
    return low


def plan(
    spec: Spec,
    epoch_s: float | None,
    seconds_left: float,
    save_s: float = 0.0,
    checkpoint_bytes: int = 0,
    start_s: float = TRAINER_START_S,
) -> Fit | None:
    """The fit for a run with `seconds_left` of its budget; None when nothing is fitted (fit:
    none, no profile figure, or not even one epoch fits: the budget's stop then says so)."""
    if spec.budget.fit is BudgetFit.NONE or epoch_s is None or epoch_s <= 0:
        return None
    epochs = epochs_in(spec, epoch_s, seconds_left, FIT_MARGIN, save_s, checkpoint_bytes, start_s)
    if epochs < 1:
        return None
    return Fit(epochs=epochs, of=spec.train.epochs, epoch_s=epoch_s, save_s=save_s)


Figure = Callable[[str], float | None]  # a profile figure by name (PreflightReport.figure)


def _measured(figure: Figure, seconds_left: float) -> tuple[float, float, int, float]:
    """The budget left and the costs (save, bytes, start) the profile measured."""
    left, start = figure(LEFT_FIGURE), figure(START_FIGURE)
    return (
        left if left is not None else seconds_left,
        figure(SAVE_FIGURE) or 0.0,
        int(figure(BYTES_FIGURE) or 0),
        start if start is not None else TRAINER_START_S,
    )


def epochs_for_figures(spec: Spec, figure: Figure, seconds_left: float) -> int:
    """`epochs_in` for the profile's figures (its epoch's steps must be among them)."""
    left, save_s, size, start_s = _measured(figure, seconds_left)
    epoch_s = figure(PROFILE_FIGURE) or 0.0
    return epochs_in(spec, epoch_s, left, FIT_MARGIN, save_s, size, start_s)


def from_figures(spec: Spec, figure: Figure, seconds_left: float) -> Fit | None:
    """The fit from the profile check's figures: the one the profile said, planned with the
    budget it had left then, else with `seconds_left`."""
    return plan(spec, figure(PROFILE_FIGURE), *_measured(figure, seconds_left))


def planned_epochs(spec: Spec, record: RunRecord) -> int:
    """The epochs the trainer is told: the fitted count, else the spec's."""
    return record.fit.epochs if record.fit is not None else spec.train.epochs
