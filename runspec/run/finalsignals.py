"""Ctrl-C (SIGINT or SIGTERM to `runspec run`) while the final push retries.

The first signal is said at once: what runspec is doing (the final push, retried until verified
or until its time is up), that no finish action follows, and what a second signal will do. The
second gives the push up at once; the run is then left finished with its weights unverified,
which `runspec push NAME`, `runspec rm` and `--resume` all take.

Under an engine a stop signal that comes before the final push is verified never exits 0
("done, final push verified"), even when every weight is verified already (each checkpoint
is pushed as it is written): the record, the log and the card are not, so it exits 75 and the
engine's fresh machine resumes and finishes the final push (or 3 when weights are unverified).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runspec.budget import overrun_end
from runspec.clock import utc_iso
from runspec.errors import Outcome
from runspec.store.hint import command
from runspec.store.state import RunStatus
from runspec.views.runinfo import nobody_drives
from runspec.voice import error, warning

if TYPE_CHECKING:
    from runspec.run.lifecycle import Lifecycle
    from runspec.store.state import RunRecord


BEFORE_TRAINING = frozenset({RunStatus.QUEUED, RunStatus.PREFLIGHT, RunStatus.STAGING})


def window_left(lc: Lifecycle) -> float:
    """Seconds left of the final push's window: the deadline plus the overrun."""
    return overrun_end(lc.record, lc.spec) - lc.clock.time()


def exiting_now(lc: Lifecycle) -> str:
    """What a second signal leaves undone, and the command that does it."""
    if lc.record.status in BEFORE_TRAINING:
        again = nobody_drives(lc.paths, lc.paths.state)
        return "second signal: exiting now: nothing was trained or pushed, no finish action" + (
            f"; {again}" if again else ""
        )
    push = command(f"push {lc.paths.name}", lc.paths.state)
    return (
        "second signal: exiting now, with no final push and no finish action: "
        f"{push} pushes and verifies what the run made"
    )


class FinalPushSignals:
    """The final push's `give_up`: asked every moment the push waits or retries."""

    def __init__(self, lc: Lifecycle, timeout: float) -> None:
        self.requests = lc.requests
        self.say = lc.say
        self.paths = lc.paths
        self.ends_at = lc.clock.time() + timeout  # when the push gives up by itself
        self._said = self.requests.interrupted.is_set()  # an earlier signal was said already

    def __call__(self) -> bool:
        if self.requests.interrupted.is_set() and not self._said:
            self._said = True
            self.say(warning(self.first_line()))
        return self.requests.aborted.is_set()

    def first_line(self) -> str:
        push = command(f"push {self.paths.name}", self.paths.state)
        return (
            "interrupted during the final push: runspec keeps pushing until the weights are "
            f"verified, at most until {utc_iso(self.ends_at)}; no finish action follows. A "
            f"second signal exits now and leaves the weights unverified on this machine ({push} "
            "pushes them later)"
        )

    def gave_up(self) -> bool:
        """Whether a second signal ended the push; said when it did."""
        if not self.requests.aborted.is_set():
            return False
        push = command(f"push {self.paths.name}", self.paths.state)
        self.say(
            error(
                "second signal: the final push is given up, NOT verified; the weights stay in "
                f"{self.paths.run_dir}: {push} pushes and verifies them"
            )
        )
        return True


def after_stop_signal(outcome: Outcome, record: RunRecord, signalled: bool) -> Outcome:
    """An engine's exit status once its stop signal came: "done" (0) only with the final push
    verified; a final push left unfinished with every weight verified asks for a fresh
    machine (75), which resumes the run and finishes it."""
    final_verified = record.last_push is not None and record.last_push.final
    if signalled and outcome is Outcome.OK and not final_verified:
        return Outcome.RETRY
    return outcome
