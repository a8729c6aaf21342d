"""The training phase: launch or re-attach, watch, plan, stop, resume.

The trainer is a detached child; this side only reads its folders (the epoch marker, status.json,
metrics.jsonl) and its identity, and talks back through the control folder. Pushes and the
budget hang off the epoch boundaries the marker reports.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from runspec.alerts import Alerts
from runspec.budget import Planner, eval_interval_of, validates
from runspec.budgetfit import planned_epochs
from runspec.clock import Clock, human_duration
from runspec.errors import Cause
from runspec.push.until import push_until_verified
from runspec.requests import RunRequests
from runspec.run.exitstep import ExitFacts, Step, next_step
from runspec.spec.model import Spec
from runspec.store.owner import RunOwner
from runspec.store.paths import RunPaths
from runspec.store.room import checkpoint_room, short_of_room, wait_for_space
from runspec.store.state import PushRecord, RunRecord, RunStatus, Termination
from runspec.trainer import control
from runspec.trainer.checkpoints import newest_intact_checkpoint
from runspec.trainer.control import TrainerOutcome, TrainJob
from runspec.trainer.launcher import TrainerHandle, start
from runspec.trainer.observer import observe
from runspec.views import messages
from runspec.views.epochline import epoch_line
from runspec.voice import error, notice, warning

if TYPE_CHECKING:
    from runspec.push import Pusher

log = logging.getLogger("runspec.run.supervise")


@dataclass(frozen=True)
class SupervisorOptions:
    tick: float = 0.5  # how often the trainer's folder is read
    stop_grace: float = 3600.0  # the longest wait for an epoch boundary after a stop request
    hang_floor: float = 600.0  # no new epoch for max(5 x longest epoch, this): hung
    first_epoch_hang: float = 3600.0


@dataclass(frozen=True)
class RunParts:
    """What the training phase works with: the run, its owner, its requests and its pusher."""

    spec: Spec
    paths: RunPaths
    owner: RunOwner
    requests: RunRequests
    clock: Clock
    say: Callable[[str], None]
    pusher: Callable[[], Pusher | None]
    options: SupervisorOptions
    alerts: Alerts

    @property
    def record(self) -> RunRecord:
        return self.owner.record


class Supervisor:
    def __init__(self, parts: RunParts) -> None:
        self.lc = parts
        self.spec = parts.spec
        self.paths = parts.paths
        self.record = parts.record
        self.owner = parts.owner
        self.requests = parts.requests
        self.clock = parts.clock
        self.planner = Planner.for_spec(self.spec, self.record, self.clock)
        self.last_epoch = 0
        self.last_marker_time = 0.0
        self.last_progress = self.clock.monotonic()
        self.longest_epoch = 0.0
        # Set once a stop was asked for, so a trainer that then exits is read correctly;
        # kept in the record (STOPPING + termination) across restarts of this process.
        self.stopping: Termination | None = (
            self.record.termination if self.record.status is RunStatus.STOPPING else None
        )
        self.interrupt_pushed = False
        self.epoch_since_launch = False
        # A stop asked before a restart of this process is bounded from now on.
        self.stop_asked_at = self.clock.monotonic() if self.stopping is not None else None

    def run(self) -> None:
        # Every route to a live trainer is tried before a new one is started: a lost
        # trainer.json must never mean two trainers in one run folder.
        handle = TrainerHandle.find(self.paths, log_line=self._found_again)
        if handle is None:
            # A resumed run (runspec.run.resume), or one whose trainer left no trace: on from
            # its newest intact checkpoint, never from epoch 0 over its own weights.
            handle = self._launch(resume_from=newest_intact_checkpoint(self.paths.run_dir))
        elif handle.alive():
            unit = f", unit {handle.unit}" if handle.unit else ""
            self.lc.say(f"re-attached to the running trainer (pid {handle.identity.pid}{unit})")
        self._seed_from_run_folder()
        # Has this trainer (maybe a resumed one) ended an epoch yet? Until then it gets the
        # longer first-epoch bound.
        self.epoch_since_launch = self.last_marker_time >= handle.started_at
        self.requests.serve_push_now(True)
        try:
            while handle is not None:
                if self._watch(handle):
                    return  # detached: leave the trainer alone
                handle = self._after_exit(handle)
        finally:
            self.requests.serve_push_now(False)

    def _found_again(self, line: str) -> None:
        # A trainer found without its trainer.json is news for people; the handle's other
        # lines (each signal it sends) belong to the debug log.
        if line.startswith("found the run's live trainer"):
            self.lc.say(warning(line))

    def _launch(self, resume_from: Path | None) -> TrainerHandle:
        assert self.record.data_yaml is not None
        epochs = planned_epochs(self.spec, self.record)
        job = TrainJob.from_spec(
            self.spec, self.paths, Path(self.record.data_yaml), resume_from, epochs
        )
        self._write_deadline()
        handle = start(job, self.paths, clock=self.clock)
        what = f"resuming from {resume_from.name}" if resume_from else "training"
        unit = f", unit {handle.unit}" if handle.unit else ""
        fitted = " (fitted to the budget)" if epochs < self.spec.train.epochs else ""
        train = f"{self.spec.train.model}, {epochs} epochs{fitted}"
        self.lc.say(f"{what}: {train} (trainer pid {handle.identity.pid}{unit})")
        if resume_from is None and self.record.restarts_used == 0:
            self.lc.alerts.send(messages.started(self.spec, self.record))
        self.last_progress = self.clock.monotonic()
        self.epoch_since_launch = False
        return handle

    def _seed_from_run_folder(self) -> None:
        """After a restart, the planner learns the epochs it missed from metrics.jsonl."""
        obs = observe(self.paths.run_dir, self.paths.control_dir)
        for row in obs.epochs:
            seconds = float(row.get("time") or 0.0)
            self.planner.record_epoch(int(row["epoch"]), seconds, bool(row.get("validated")))
            self.longest_epoch = max(self.longest_epoch, seconds)
        marker = control.read_epoch_marker(self.paths.control_dir)
        if marker is not None:
            self.last_epoch, self.last_marker_time = marker.epoch, marker.time
            # Epochs may have ended while nobody watched (a daemon restart): count them.
            if marker.total_epochs:
                self.owner.epoch_ended(marker.epoch, marker.total_epochs)

    def _watch(self, handle: TrainerHandle) -> bool:
        """Watch until the trainer exits (False) or we are told to detach (True)."""
        lc = self.lc
        requests = self.requests
        while handle.alive():
            if requests.detached.is_set():
                return True
            if requests.aborted.is_set():
                lc.say(warning("second signal: ending the trainer now"))
                self.stopping = self.stopping or Termination.INTERRUPTED
                handle.kill_now()
                break
            if requests.interrupted.is_set():
                self._ask_stop(handle, Termination.INTERRUPTED, "interrupt")
            asked = requests.take_push_now()
            if asked or (requests.interrupted.is_set() and not self.interrupt_pushed):
                # A preemption gives seconds: the newest complete checkpoint goes out now,
                # without waiting for the epoch in progress.
                self.interrupt_pushed = True
                pushed = self._push_newest_now()
                for request in asked:
                    request.answer(pushed, "" if pushed else "the immediate push failed")
            if requests.poll_cancel(self.paths, lc.say):
                self._ask_stop(handle, Termination.CANCELLED, "cancel")
            marker = control.read_epoch_marker(self.paths.control_dir)
            # A resumed trainer may repeat an epoch number: a new marker is a new write.
            if marker is not None and marker.time != self.last_marker_time:
                self._epoch_ended(handle, marker)
            if self._past_point_of_no_return():
                self._budget("the epoch in progress would eat the final push's reserve; ending it")
                self.stopping = Termination.BUDGET
                handle.kill_now()
                break
            if self._stop_overdue():
                lc.say(
                    warning(
                        f"the trainer did not reach an epoch boundary within "
                        f"{human_duration(self._stop_grace())} of the stop request; ending it"
                    )
                )
                handle.stop(grace_s=0)
                break
            if self._hung():
                lc.say(warning("the trainer made no progress for too long; ending it to resume"))
                handle.kill_now()
                break
            self.clock.sleep(lc.options.tick)
        return False

    def _epoch_ended(
        self, handle: TrainerHandle, marker: control.EpochMarker, exited: bool = False
    ) -> None:
        # The same trainer writing the same epoch again (it vouches for weights written after
        # its last epoch): new files to push, no new epoch to tell of.
        repeat = marker.epoch == self.last_epoch and self.epoch_since_launch
        self.last_epoch, self.last_marker_time = marker.epoch, marker.time
        pusher = self.lc.pusher()
        if pusher is not None:
            pusher.notify_checkpoint()
        if repeat:
            return
        self.epoch_since_launch = True
        self.last_progress = self.clock.monotonic()
        self.longest_epoch = max(self.longest_epoch, marker.epoch_seconds)
        self.planner.record_epoch(marker.epoch, marker.epoch_seconds, marker.validated)
        self.owner.epoch_ended(marker.epoch, marker.total_epochs)
        pending = pusher.pending_bytes() if pusher is not None else 0
        rate = pusher.upload_rate() if pusher is not None else None
        self._write_deadline()
        total, interval = marker.total_epochs, eval_interval_of(self.spec)
        cut = self.planner.cuts_at(marker.time, marker.epoch, total, interval)
        obs = observe(self.paths.run_dir, self.paths.control_dir)
        left = self.planner.deadline - self.clock.time()
        self.lc.say(epoch_line(marker.epoch, total, obs, left, cut))
        if marker.epoch >= total or self.stopping is not None or exited:
            return  # no trainer to stop early: how it ended decides what comes next
        next_validates = validates(marker.epoch + 1, total, interval)
        if not self.planner.fits_another_epoch(next_validates, pending, rate):
            self._budget(
                f"epoch {marker.epoch + 1} may not leave time for the final push; the trainer "
                f"stops at the next boundary, after epoch {marker.epoch} of {total}"
            )
            self._ask_stop(handle, Termination.BUDGET, "budget")

    def _budget(self, why: str) -> None:
        """The budget ends training early: said, and sent to whoever walked away."""
        self.lc.say(notice(f"budget: {why}"))
        self.lc.alerts.send(messages.budget_stop(self.spec, why))

    def _write_deadline(self) -> None:
        """The stop time and the planner's next-epoch predictions, so the trainer, deciding at
        the boundary itself, stops when the planner would."""
        planner = self.planner
        control.write_deadline(
            self.paths.control_dir, planner.stop_at(), planner.guesses(), planner.deadline
        )

    def _ask_stop(self, handle: TrainerHandle, why: Termination, reason: str) -> None:
        if self.stopping is not None:
            return
        self.stopping = why
        self.stop_asked_at = self.clock.monotonic()
        handle.request_stop(reason)
        if why is not Termination.BUDGET:  # the budget's own line said it
            self.lc.say(f"stop requested ({why.value}): the trainer stops at the next boundary")
        if self.record.status is RunStatus.TRAINING:
            self.owner.transition(RunStatus.STOPPING, reason, why)

    def _push_newest_now(self) -> PushRecord | None:
        pusher = self.lc.pusher()
        if pusher is None:
            return None
        self.lc.say("pushing the newest complete checkpoint now")
        # A second signal ends it: exiting at once is what that signal asks.
        aborted = self.requests.aborted.is_set
        pushed = push_until_verified(
            pusher, final=False, timeout=60.0, clock=self.clock, give_up=aborted
        )
        if pushed is None:
            self.lc.say(warning("the immediate push was not verified"))
        return pushed

    def _past_point_of_no_return(self) -> bool:
        pusher = self.lc.pusher()
        pending = pusher.pending_bytes() if pusher is not None else 0
        rate = pusher.upload_rate() if pusher is not None else None
        return self.clock.time() >= self.planner.deadline - self.planner.reserve(pending, rate)

    def _stop_overdue(self) -> bool:
        if self.stop_asked_at is None:
            return False
        return self.clock.monotonic() - self.stop_asked_at > self._stop_grace()

    def _stop_grace(self) -> float:
        """How long a stop waits for the epoch boundary: less after an engine's stop signal,
        whose SIGKILL comes long before any boundary."""
        grace, cut = self.lc.options.stop_grace, self.requests.interrupt_grace
        return min(grace, cut) if cut is not None and self.requests.interrupted.is_set() else grace

    def _hung(self) -> bool:
        opts = self.lc.options
        if not self.epoch_since_launch:
            # A (re)started trainer imports, builds the model and maybe autobatches first.
            limit = opts.first_epoch_hang
        else:
            limit = max(5 * self.longest_epoch, opts.hang_floor)
        return self.clock.monotonic() - self.last_progress > limit

    def _after_exit(self, handle: TrainerHandle) -> TrainerHandle | None:
        """Read how the trainer ended; resume it or move the run on. Returns a new handle to
        watch when the trainer was resumed."""
        # The trainer may have ended an epoch since the last tick's read and exited inside the
        # same tick (a stop at the boundary, the last epoch): the run is told of it first, or
        # its record stays an epoch short of the checkpoint pushed for it.
        marker = control.read_epoch_marker(self.paths.control_dir)
        if marker is not None and marker.time != self.last_marker_time:
            self._epoch_ended(handle, marker, exited=True)
        facts = self._exit_facts(handle)
        step = next_step(facts)
        if step.step is Step.WAIT_FOR_SPACE:
            if self._wait_for_space():
                self.lc.say("space is back: resuming the trainer")
                return self._launch(resume_from=newest_intact_checkpoint(self.paths.run_dir))
            if self.requests.detached.is_set():
                return None  # still waiting for space; whoever drives it next goes on waiting
            step = next_step(
                replace(
                    facts,
                    stopping=self.stopping,
                    past_point_of_no_return=self._past_point_of_no_return(),
                    gave_up_on_space=True,
                )
            )
        if step.step is Step.END:
            assert step.termination is not None
            self._end(step.termination, step.reason, step.cause)
            return None
        self.owner.restarted()
        checkpoint = newest_intact_checkpoint(self.paths.run_dir)
        self.lc.say(
            warning(
                f"the trainer died unexpectedly; restart {self.record.restarts_used}"
                f"/{self.spec.train.restarts}"
            )
        )
        return self._launch(resume_from=checkpoint)

    def _exit_facts(self, handle: TrainerHandle) -> ExitFacts:
        result = handle.result()
        marker = control.read_epoch_marker(self.paths.control_dir)
        done = marker is not None and marker.epoch >= marker.total_epochs
        outcome = result.outcome if result is not None else None
        return ExitFacts(
            outcome=outcome,
            reason=result.reason if result is not None else "",
            error=f"{result.error_type}: {result.error_message}" if result is not None else "",
            cause=result.cause if result is not None else None,
            no_space=result is not None and result.no_space,
            done=done,
            stopping=self.stopping,
            last_epoch=self.last_epoch,
            restarts_used=self.record.restarts_used,
            restarts=self.spec.train.restarts,
            past_point_of_no_return=self._past_point_of_no_return(),
            # Read only where it decides (a trainer that died short of its last epoch).
            short_of_room=outcome in (TrainerOutcome.FAILED, TrainerOutcome.KILLED)
            and not done
            and short_of_room(self.paths.run_dir),
        )

    def _wait_for_space(self) -> bool:
        """Until the run folder's disk has room for a checkpoint and its staged copy again:
        True then; False when the run must move on (the budget's end, a stop, a detach)."""
        where = self.paths.run_dir

        def give_up() -> bool:
            requests = self.requests
            return (
                requests.detached.is_set()
                or requests.cancelled.is_set()
                or requests.interrupted.is_set()
                or self.stopping is not None
                or self._past_point_of_no_return()
            )

        needed = checkpoint_room(where)
        self.owner.note_disk_full(
            str(where),
            needed,
            f"the trainer ran out of space in {where}; waiting for {needed / 1e6:.0f} MB free "
            "to resume it",
        )
        return wait_for_space(where, needed, self.owner, self.clock, self.lc.options.tick, give_up)

    def _end(self, termination: Termination, reason: str, cause: Cause | None = None) -> None:
        failed = termination in (Termination.FAILED_TRAINING, Termination.LOST)
        self.lc.say(error(reason) if failed else reason)
        self.owner.transition(RunStatus.PUSHING, reason, termination, cause)
