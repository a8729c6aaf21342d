"""A second Ctrl-C gives the run up at once in every phase, the slow steps before training too.

Signal handlers only set flags (runspec.requests). During training the supervisor polls them;
the preflight and the staging are waited for here, with the flags polled as they run: the
first signal is said (the run ends as soon as the step does, nothing trained or pushed), the
second raises GaveUp. The preflight's child is killed then (runspec.preflight.run_preflight);
a staging thread is left to the process's exit (a daemon thread): its download stays in the
Hub cache unfinished, and nothing of it counts as staged. The run is left where it stood, which
`runspec run SPEC --resume` takes up; nothing is pushed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from runspec.dataset.staging import hf_home_for, stage_dataset
from runspec.errors import GaveUp
from runspec.preflight import run_preflight
from runspec.requests import RunRequests
from runspec.voice import error, warning

if TYPE_CHECKING:
    from runspec.preflight import Phase
    from runspec.preflight.report import PreflightReport
    from runspec.run.lifecycle import Lifecycle

T = TypeVar("T")
TICK_S = 0.2  # how often a waiting step looks at the flags


class SlowStep:
    """One step before training (`what`: "the preflight", "the staging"), given up at a
    second signal."""

    def __init__(self, requests: RunRequests, what: str, say: Callable[[str], None]) -> None:
        self.requests = requests
        self.what = what
        self._say = say
        self._said = False

    def __call__(self) -> bool:
        """Polled while the step runs: True once a second signal asks to give it up."""
        if self.requests.interrupted.is_set() and not self._said:
            self._said = True
            self._say(
                warning(
                    f"interrupted during {self.what}: the run ends as soon as it does, with "
                    "nothing trained, pushed or finished; a second signal gives it up at once"
                )
            )
        return self.requests.aborted.is_set()

    def say(self, line: str) -> None:
        """The step's own progress, dropped once it is given up."""
        if not self.requests.aborted.is_set():
            self._say(line)

    def gave_up(self, left: str) -> GaveUp:
        """Said at once (the run's log keeps it), and raised to the run's loop."""
        self._say(error(f"second signal: {self.what} is given up at once ({left})"))
        return GaveUp(f"{self.what} was given up at a second signal")

    def run(self, work: Callable[[], T], left: str) -> T:
        """`work` in a thread of its own: its result or its error, or GaveUp at a second
        signal. `left`: what a given-up `work` leaves behind."""
        done = threading.Event()
        result: list[T] = []
        error: list[BaseException] = []

        def target() -> None:
            try:
                result.append(work())
            except BaseException as exc:  # re-raised in the caller's thread
                error.append(exc)
            finally:
                done.set()

        threading.Thread(target=target, name="runspec-slow-step", daemon=True).start()
        while not done.wait(TICK_S):
            if self():
                raise self.gave_up(left)
        if error:
            raise error[0]
        return result[0]


def preflight(lc: Lifecycle, phase: Phase) -> PreflightReport:
    """One phase of the run's preflight, its child ended at a second signal."""
    step = SlowStep(lc.requests, "the preflight", lc.say)
    timeout = lc.options.preflight_timeout
    try:
        return run_preflight(lc.spec, lc.paths, phase, timeout, accepted=True, give_up=step)
    except GaveUp:
        raise step.gave_up("its checks' child is ended") from None


def staged(lc: Lifecycle) -> Path:
    """The run's dataset staged (its data.yaml), or GaveUp at a second signal."""
    step = SlowStep(lc.requests, "the staging", lc.say)
    left = f"a download stays unfinished in the Hub cache of {hf_home_for(lc.spec)}"
    return step.run(lambda: stage_dataset(lc.spec, lc.paths, progress=step.say), left)
