"""What the supervisor does once the trainer has exited: a pure function of what it knows.

The facts are read by runspec.run.supervise (the trainer's result.json, its epoch marker, the stop
asked for, the restarts left, the budget's point of no return, the disk's room); `next_step`
turns them into one step, so every case is a row of a table test rather than a training run.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from runspec.errors import Cause
from runspec.store.state import STOP_REASONS, Termination
from runspec.trainer.control import TrainerOutcome
from runspec.trainer.safeload import UnsafeCheckpoint


class Step(str, enum.Enum):
    END = "end"  # training is over: the run moves on to its final push
    WAIT_FOR_SPACE = "wait-for-space"  # a full disk is a state: wait, then resume (no restart)
    RESTART = "restart"  # resume from the newest intact checkpoint, counting one restart


@dataclass(frozen=True)
class ExitFacts:
    outcome: TrainerOutcome | None  # result.json's; None when the trainer left none
    reason: str = ""  # result.json's reason
    error: str = ""  # "<type>: <message>" of a LibreYOLO exception
    cause: Cause | None = None  # result.json's: the failure was this machine's
    no_space: bool = False  # result.json's: the trainer's write met a full disk
    done: bool = False  # the epoch marker shows the last epoch
    stopping: Termination | None = None  # the stop this side asked for, if any
    last_epoch: int = 0
    restarts_used: int = 0
    restarts: int = 2  # train.restarts
    past_point_of_no_return: bool = False
    short_of_room: bool = False  # the run folder's disk has no room for a checkpoint now
    gave_up_on_space: bool = False  # a wait for space ended without space (decided again)


@dataclass(frozen=True)
class ExitStep:
    step: Step
    termination: Termination | None = None  # for END
    reason: str = ""  # for END: the transition's reason, in a person's words
    cause: Cause | None = None  # for END after a failure: this machine's fault


def _end(termination: Termination, reason: str) -> ExitStep:
    return ExitStep(Step.END, termination, reason)


def next_step(f: ExitFacts) -> ExitStep:
    """The one step after the trainer's exit."""
    if f.outcome is TrainerOutcome.COMPLETED:
        return _end(f.stopping or Termination.COMPLETED, "training completed")
    if f.outcome is TrainerOutcome.STOPPED:
        why = f.stopping or STOP_REASONS.get(f.reason, Termination.INTERRUPTED)
        return _end(why, f"training stopped at epoch {f.last_epoch} ({why.value})")
    out_of_space = f.no_space and not f.done and f.outcome is not None
    if f.outcome in (TrainerOutcome.FAILED, TrainerOutcome.KILLED) and not f.done:
        # A trainer that died on a full disk may not even have said so (its result.json
        # needs space too): what the disk says now decides.
        out_of_space = out_of_space or f.short_of_room
    if out_of_space and f.stopping is None and not f.gave_up_on_space:
        return ExitStep(Step.WAIT_FOR_SPACE)
    if f.outcome is TrainerOutcome.FAILED and f.done and f.no_space:
        return _end(Termination.COMPLETED, "training completed (its last writes met a full disk)")
    if f.outcome is TrainerOutcome.FAILED:
        # LibreYOLO raised: retrying would raise again.
        if f.error.startswith(f"{UnsafeCheckpoint.__name__}:"):
            # The trainer refused its checkpoint before LibreYOLO saw it: said as it is.
            return _end(Termination.FAILED_TRAINING, f"resume refused: {f.reason or f.error}")
        failed = f"LibreYOLO failed: {f.reason or f.error}"
        return ExitStep(Step.END, Termination.FAILED_TRAINING, failed, f.cause)
    if f.stopping is not None:
        return _end(f.stopping, f"trainer ended at epoch {f.last_epoch}")
    if f.done:
        return _end(Termination.COMPLETED, "training completed (the trainer died after it)")
    if f.past_point_of_no_return:
        # A restart now could not train an epoch before the reserve: push what there is.
        return _end(
            Termination.BUDGET,
            f"the trainer died at epoch {f.last_epoch}, too close to the deadline to resume",
        )
    if f.restarts_used >= f.restarts:
        return _end(
            Termination.LOST,
            f"the trainer died at epoch {f.last_epoch} and no restart is left "
            f"(train.restarts: {f.restarts})",
        )
    return ExitStep(Step.RESTART)
