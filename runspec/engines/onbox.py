"""`runspec run` under an engine that rents and tears down machines (SkyPilot, dstack, Hugging
Face Jobs): the engine owns the machine, runspec owns "done".

Under an engine runspec never calls a provider, never arms its failsafe and never powers off,
whatever `finish:` says: the engine ends the machine when the job exits, and a provider key is
not needed. What it tells the engine is its exit status (`engine_outcome`): 0 done or stopped by
the budget with the final push verified, 75 give me a fresh machine, 2 a permanent mistake
(never retry), 3 the final push could not be verified. SIGINT/SIGTERM from the engine means
push now and exit within the engine's grace: `GraceWatch` exits by itself when that grace is
nearly spent, with the code the weights on the target justify.

The engine is named by `--engine NAME`, by `RUNSPEC_ENGINE`, or recognised by the task id
variable SkyPilot (`SKYPILOT_TASK_ID`, stable across recoveries) and dstack (`DSTACK_RUN_ID`)
set on every node. Hugging Face Jobs sets no variable that huggingface_hub's source or the
engines note names, so it is only ever named (`runspec launch --on hf-jobs` can set
RUNSPEC_ENGINE in the job's environment).
"""

from __future__ import annotations

import contextlib
import enum
import os
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from runspec.engines.task import HF_TASK_ID_VARIABLE
from runspec.errors import Outcome, UsageError
from runspec.machine.verdict import Safety
from runspec.machineowner import MachineOwner, engine_owned
from runspec.spec.model import FinishAction, FinishSpec
from runspec.store.state import RunRecord, Termination

ENGINE_ENV = "RUNSPEC_ENGINE"


class Engine(str, enum.Enum):
    SKYPILOT = "skypilot"
    DSTACK = "dstack"
    HF_JOBS = "hf-jobs"


TITLES = {Engine.SKYPILOT: "SkyPilot", Engine.DSTACK: "dstack", Engine.HF_JOBS: "HF Jobs"}
# The variable that holds the run's identity across machines, by engine; an engine is
# recognised by its own (SkyPilot's, dstack's). HF Jobs gives a job no id of its own that the
# job can read: `runspec launch --on hf-jobs` puts one per launch in the job's environment
# (runspec.engines.hfjobs), the same for each of its attempts.
RECOGNISED_BY = {Engine.SKYPILOT: "SKYPILOT_TASK_ID", Engine.DSTACK: "DSTACK_RUN_ID"}
TASK_ID_VARS = {**RECOGNISED_BY, Engine.HF_JOBS: HF_TASK_ID_VARIABLE}
# Seconds between the engine's stop signal and its SIGKILL, as planned for. dstack's runner
# sends SIGKILL 10 s after SIGINT; HF Jobs documents none (plan for dstack's); SkyPilot tears
# a preempted or cancelled VM down with no signal at all (sky/core.py, down(): the backend's
# teardown, after a SIGTERM only with --graceful, which does not wait for the job): plan for
# dstack's, and push every checkpoint as it is written.
GRACES = {Engine.SKYPILOT: 10.0, Engine.DSTACK: 10.0, Engine.HF_JOBS: 10.0}
# Where the grace is this short, every checkpoint is pushed as soon as it is written: when the
# signal comes, the newest one is already on its way.
EAGER_BELOW = 15.0


@dataclass(frozen=True)
class EngineContext:
    """The engine this run is under, and what that changes on the box."""

    engine: Engine
    task_id: str | None  # the engine's id for the run: the same on every node and every retry
    grace: float

    @property
    def title(self) -> str:
        return TITLES[self.engine]

    @property
    def eager_push(self) -> bool:
        return self.grace < EAGER_BELOW

    def owner(self) -> MachineOwner:
        """Who ends the machine: this engine (runspec.machineowner, read by runspec.run.driver)."""
        return engine_owned(self.title, self.eager_push)

    def line(self, finish: FinishSpec) -> str:
        """Said once, as the run starts."""
        task = f" (task {self.task_id})" if self.task_id else ""
        kept = (
            f"finish.action {finish.action.value} is not applied, "
            if finish.action is not FinishAction.NONE
            else ""
        )
        eager = "; every checkpoint is pushed as soon as it is written" if self.eager_push else ""
        return (
            f"under {self.title}{task}: the engine owns this machine: {kept}no provider is "
            f"called, no failsafe armed, nothing powered off; a stop signal pushes and exits "
            f"within {self.grace:.0f} s{eager}"
        )


def detect(environ: Mapping[str, str], named: str | None = None) -> EngineContext | None:
    """The engine named (`--engine`, then RUNSPEC_ENGINE), else the one whose task variable is
    set; None on a machine runspec itself ends."""
    name = named or environ.get(ENGINE_ENV, "").strip() or None
    if name is not None:
        try:
            engine = Engine(name)
        except ValueError:
            known = ", ".join(e.value for e in Engine)
            raise UsageError(f"unknown engine {name!r}: one of {known}") from None
    else:
        found = [e for e, var in RECOGNISED_BY.items() if environ.get(var, "").strip()]
        if not found:
            return None
        engine = found[0]
    var = TASK_ID_VARS.get(engine)
    task_id = environ.get(var, "").strip() or None if var is not None else None
    return EngineContext(engine=engine, task_id=task_id, grace=GRACES[engine])


def engine_outcome(record: RunRecord, safety: Safety) -> Outcome:
    """The exit status that tells the engine what to do next."""
    term = record.termination or Termination.INTERRUPTED
    if record.cause is not None and term in (
        Termination.FAILED_PREFLIGHT,
        Termination.FAILED_TRAINING,
    ):
        if not record.cause.fresh_machine_may_pass:
            # No machine of this kind passes (runspec.preflight.gpu): never ask for one.
            return Outcome.INVALID
        return Outcome.RETRY  # this machine's fault, decided where it was caught
    if term in (Termination.FAILED_PREFLIGHT, Termination.FAILED_STAGING):
        return Outcome.INVALID  # a missing dataset, a spec this machine cannot train
    if not safety.safe:
        return Outcome.UNVERIFIED
    if term is Termination.INTERRUPTED:
        return Outcome.RETRY  # preempted or stopped: the weights are out, go on elsewhere
    if term in (Termination.COMPLETED, Termination.BUDGET, Termination.CANCELLED):
        return Outcome.OK
    return Outcome.FAILED


class GraceWatch:
    """After the engine's stop signal: when its grace is nearly spent and the run has not
    ended, `expire` exits the process (the engine's SIGKILL would come next)."""

    def __init__(self, grace: float, expire: Callable[[], None]) -> None:
        # The margin lets the exit itself, and the engine's own clock, be a little late.
        self.after = max(grace - max(1.5, grace * 0.2), 0.5)
        self._expire = expire
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(self.after, self._expire)
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def hard_exit(code: int) -> None:
    """Exit now, from any thread: the engine kills whatever is left anyway."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
