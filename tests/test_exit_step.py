"""The supervisor's decision after the trainer exits, case by case: one row per branch, so a
change to any of them shows here and not only in a real training run."""

from __future__ import annotations

import pytest

from runspec.run.exitstep import ExitFacts, ExitStep, Step, next_step
from runspec.store.state import Termination as T
from runspec.trainer.control import TrainerOutcome as O

NOSPACE = "No space left on device: /runs has 0 bytes free (OSError: [Errno 28] last.pt)"
END, WAIT, RESTART = Step.END, Step.WAIT_FOR_SPACE, Step.RESTART

CASES: list[tuple[str, ExitFacts, ExitStep]] = [
    (
        "completed",
        ExitFacts(O.COMPLETED, done=True),
        ExitStep(END, T.COMPLETED, "training completed"),
    ),
    (
        "completed after a cancel asked at the last boundary keeps the cancel",
        ExitFacts(O.COMPLETED, done=True, stopping=T.CANCELLED),
        ExitStep(END, T.CANCELLED, "training completed"),
    ),
    (
        "stopped on the budget it was asked for",
        ExitFacts(O.STOPPED, "budget", last_epoch=4, stopping=T.BUDGET),
        ExitStep(END, T.BUDGET, "training stopped at epoch 4 (budget)"),
    ),
    (
        "stopped by its own deadline, nobody asking",
        ExitFacts(O.STOPPED, "deadline", last_epoch=3),
        ExitStep(END, T.BUDGET, "training stopped at epoch 3 (budget)"),
    ),
    (
        "stopped for an unknown reason reads as interrupted",
        ExitFacts(O.STOPPED, "??", last_epoch=2),
        ExitStep(END, T.INTERRUPTED, "training stopped at epoch 2 (interrupted)"),
    ),
    (
        "failed on a full disk before the last epoch waits for space",
        ExitFacts(O.FAILED, NOSPACE, no_space=True),
        ExitStep(WAIT),
    ),
    (
        # The trainer types a full disk where it catches the error (result.json's no_space);
        # words are never read: an old result file without the field, or a message that only
        # says so, is judged by what the disk says now (short_of_room).
        "failed with words of a full disk, not typed so, on a disk with room: no wait",
        ExitFacts(O.FAILED, NOSPACE, error="OSError: [Errno 28] No space left on device"),
        ExitStep(END, T.FAILED_TRAINING, f"LibreYOLO failed: {NOSPACE}"),
    ),
    (
        "killed with no word and a disk short of room waits for space",
        ExitFacts(O.KILLED, short_of_room=True),
        ExitStep(WAIT),
    ),
    (
        "a full disk while a stop is asked ends with the stop",
        ExitFacts(O.KILLED, short_of_room=True, stopping=T.CANCELLED, last_epoch=5),
        ExitStep(END, T.CANCELLED, "trainer ended at epoch 5"),
    ),
    (
        "a wait for space given up near the deadline ends on the budget",
        ExitFacts(
            O.KILLED,
            short_of_room=True,
            gave_up_on_space=True,
            past_point_of_no_return=True,
            last_epoch=6,
        ),
        ExitStep(END, T.BUDGET, "the trainer died at epoch 6, too close to the deadline to resume"),
    ),
    (
        "failed on a full disk after its last epoch is complete",
        ExitFacts(O.FAILED, NOSPACE, done=True, no_space=True),
        ExitStep(END, T.COMPLETED, "training completed (its last writes met a full disk)"),
    ),
    (
        "LibreYOLO raised: no retry",
        ExitFacts(O.FAILED, error="ValueError: bad data"),
        ExitStep(END, T.FAILED_TRAINING, "LibreYOLO failed: ValueError: bad data"),
    ),
    (
        "LibreYOLO raised with a reason of its own",
        ExitFacts(O.FAILED, "cuda out of memory", error="RuntimeError: x"),
        ExitStep(END, T.FAILED_TRAINING, "LibreYOLO failed: cuda out of memory"),
    ),
    (
        "a resume's checkpoint refused before LibreYOLO saw it: no retry, said as it is",
        ExitFacts(O.FAILED, "the checkpoint x holds y: refused", error="UnsafeCheckpoint: z"),
        ExitStep(END, T.FAILED_TRAINING, "resume refused: the checkpoint x holds y: refused"),
    ),
    (
        "killed after a stop was asked ends with that stop",
        ExitFacts(O.KILLED, stopping=T.INTERRUPTED, last_epoch=1),
        ExitStep(END, T.INTERRUPTED, "trainer ended at epoch 1"),
    ),
    (
        "died after its last epoch",
        ExitFacts(O.KILLED, done=True),
        ExitStep(END, T.COMPLETED, "training completed (the trainer died after it)"),
    ),
    (
        "no result.json after its last epoch",
        ExitFacts(None, done=True),
        ExitStep(END, T.COMPLETED, "training completed (the trainer died after it)"),
    ),
    (
        "died too close to the deadline to resume",
        ExitFacts(O.KILLED, past_point_of_no_return=True, last_epoch=2),
        ExitStep(END, T.BUDGET, "the trainer died at epoch 2, too close to the deadline to resume"),
    ),
    (
        "died with no restart left",
        ExitFacts(O.KILLED, last_epoch=3, restarts_used=2, restarts=2),
        ExitStep(
            END, T.LOST, "the trainer died at epoch 3 and no restart is left (train.restarts: 2)"
        ),
    ),
    (
        "died with restarts left",
        ExitFacts(O.KILLED, restarts_used=1, restarts=2),
        ExitStep(RESTART),
    ),
    (
        "vanished without a result.json, restarts left",
        ExitFacts(None),
        ExitStep(RESTART),
    ),
    (
        "vanished without a result.json on a full disk: a restart, as no word said why",
        ExitFacts(None, short_of_room=True),
        ExitStep(RESTART),
    ),
]


@pytest.mark.parametrize(("facts", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_next_step(facts: ExitFacts, expected: ExitStep) -> None:
    assert next_step(facts) == expected
