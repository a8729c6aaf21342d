"""One run, from the queue to the end of billing: the code `runspec run` and the daemon share.

    queued -> preflight -> staging -> training -> stopping -> pushing -> finishing -> finished

Every phase reads and writes the persisted run record, so `run()` can be entered again after a
restart at whatever status the record holds: a live trainer is re-attached, a dead one resumed
or ended, a pending final push or finish carried out. The status only moves forward. Whoever
runs a lifecycle holds the run's lock (runspec.store.owner) for as long as it does; other threads
only send it requests (runspec.requests). A finish that ends the machine is handed to the
machine's end (runspec.machine.endgame), which waits for the other runs and judges them all. Nothing
here imports torch: the heavy work happens in child programs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runspec import budgetfit
from runspec.alerts import Alerts
from runspec.budget import deadline_of
from runspec.clock import SYSTEM, Clock, human_duration, utc_iso
from runspec.cost import run_cost
from runspec.errors import GaveUp, RunspecError
from runspec.machine import failsafe
from runspec.machine.endgame import Endgame
from runspec.machineowner import RUNSPEC, MachineOwner
from runspec.push import Pusher
from runspec.push.cardpush import made_weights, push_card
from runspec.push.endconfirm import send_end
from runspec.push.receipt import send_receipt
from runspec.push.report import prepare
from runspec.push.until import push_until_verified
from runspec.requests import RunRequests
from runspec.run import giveup
from runspec.run.cancelend import cancelled_before_finish, decide_end
from runspec.run.finalsignals import FinalPushSignals, exiting_now, window_left
from runspec.run.supervise import RunParts, Supervisor, SupervisorOptions
from runspec.spec.model import Spec
from runspec.store.owner import RunLock, RunOwner
from runspec.store.paths import RunPaths
from runspec.store.room import SPACE_POLL_S, is_stuck
from runspec.store.state import RecordStore, RunRecord, RunStatus, Termination
from runspec.timers import Timers
from runspec.trainer.checkpoints import vouch_after_exit
from runspec.trainer.launcher import TrainerHandle
from runspec.views import messages
from runspec.voice import Transient, error, warning
from runspec.watch.endedby import ended_by_watch

if TYPE_CHECKING:
    from runspec.preflight import Phase
    from runspec.preflight.report import PreflightReport

log = logging.getLogger("runspec.run.lifecycle")


@dataclass(frozen=True)
class LifecycleOptions:
    owner: MachineOwner = RUNSPEC  # who ends the machine (runspec.machineowner)
    finish_dry_run: bool = False
    progress: Callable[[str], None] = print
    tick: float = 0.5  # how often the trainer's folder is read
    preflight_timeout: float = 900.0
    stop_grace: float = 3600.0  # the longest wait for an epoch boundary after a stop request
    hang_floor: float = 600.0  # no new epoch for max(5 x longest epoch, this): hung
    first_epoch_hang: float = 3600.0
    skip_preflight: bool = False
    notify: tuple[str, ...] = ()  # the daemon config's URLs, for a spec without `notify:`
    timers: Timers | None = None  # the run's (runspec.run.driver); None: no push.every


class Lifecycle:
    def __init__(
        self,
        spec: Spec,
        paths: RunPaths,
        store: RecordStore,
        options: LifecycleOptions | None = None,
        clock: Clock = SYSTEM,
        requests: RunRequests | None = None,
        lock: RunLock | None = None,
    ) -> None:
        record = store.load(spec.name)
        if record is None:
            raise RunspecError(f"run {spec.name!r} was never accepted (no record)")
        self.spec = spec
        self.paths = paths
        self.options = options or LifecycleOptions()
        self.clock = clock
        self.owner = RunOwner(store, record, clock)
        self.owner.on_disk_full = self.say
        self.requests = requests or RunRequests()
        self.lock = lock or RunLock(paths)
        self._pusher: Pusher | None = None
        self.alerts = Alerts.choose(spec.notify, self.options.notify, self.say)

    @property
    def record(self) -> RunRecord:
        return self.owner.record

    def say(self, line: str) -> None:
        """Tell the person watching, and keep it in the run's own log (pushed with it, read
        by `runspec logs`). A progress bar (runspec.voice.Transient) is never kept."""
        self.options.progress(line)
        if isinstance(line, Transient):
            return
        stamp = utc_iso(self.clock.time())
        try:
            self.paths.job_dir.mkdir(parents=True, exist_ok=True)
            with open(self.paths.runspec_log, "a") as fh:
                fh.writelines(f"{stamp} {part}\n" for part in line.splitlines() or [""])
        except OSError as exc:
            log.warning("%s: cannot write runspec.log: %s", self.spec.name, exc)

    # The phases.
    def run(self) -> RunRecord:
        """Drive the run until it is finished (or detached); raises OwnedElsewhere when
        another process drives it."""
        took = not self.lock.held
        if took:
            self.lock.acquire()
        try:
            return self._run()
        finally:
            self._stop_pusher()
            if took:
                self.lock.release()

    def _run(self) -> RunRecord:
        steps: dict[RunStatus, Callable[[], None]] = {
            RunStatus.QUEUED: self._start,
            RunStatus.PREFLIGHT: self._preflight,
            RunStatus.STAGING: self._stage,
            RunStatus.TRAINING: self._train,
            RunStatus.STOPPING: self._train,
            RunStatus.PUSHING: self._final_push,
            RunStatus.FINISHING: self._finish,
        }
        if self.record.status not in (RunStatus.QUEUED, RunStatus.FINISHED):
            self._rearm_failsafe()  # a transient timer does not survive a reboot
        failed_in: set[RunStatus] = set()
        while self.record.status is not RunStatus.FINISHED:
            self.owner.flush()
            if self.requests.detached.is_set():
                self.say("detached; the trainer keeps running")
                break
            if self.requests.aborted.is_set():
                self.say(warning(exiting_now(self)))
                break
            if self.record.status in (RunStatus.QUEUED, RunStatus.PREFLIGHT, RunStatus.STAGING):
                if self.requests.poll_cancel(self.paths, self.say):
                    self._end_early("cancelled", Termination.CANCELLED)
                    continue
                if (
                    self.requests.interrupted.is_set()
                    and self.record.status is not RunStatus.QUEUED
                ):
                    # Once started, an interrupted run still pushes its files.
                    self._end_early("interrupted", Termination.INTERRUPTED)
                    continue
            status = self.record.status
            try:
                steps[status]()
            except GaveUp:
                continue  # a second signal, said where the step was given up: the loop ends
            except Exception as exc:
                if is_stuck(exc, self.paths.state):  # a full disk, a read-only state folder
                    self._wait_for_space(status, exc)
                    continue  # the same phase again: a state, not a failure
                # A bug must not strand the run: its weights still get pushed and the
                # machine's finish still decided. Once per status.
                if status in failed_in or not self._recover(status, exc):
                    raise
                failed_in.add(status)
        if self.record.status is RunStatus.FINISHED and failsafe.end_unconfirmed(self.record):
            self.say("failsafe: left armed: the machine's end was not confirmed")
        elif self.record.status is RunStatus.FINISHED:
            failsafe.disarm(self.spec, self.paths, progress=self.say)
            self.paths.cancel_file.unlink(missing_ok=True)
        return self.record

    def _wait_for_space(self, status: RunStatus, exc: BaseException) -> None:
        """Stay in this phase and try it again once space may be back."""
        where = getattr(exc, "filename", None) or str(self.paths.job_dir)
        self.owner.note_stuck(str(where), f"while {status.value}: {exc}", exc)
        end = self.clock.monotonic() + SPACE_POLL_S
        while self.clock.monotonic() < end and not self.requests.detached.is_set():
            self.clock.sleep(min(self.options.tick, SPACE_POLL_S))

    def _recover(self, status: RunStatus, exc: Exception) -> bool:
        """After an unexpected error in a phase: move the run to where its weights get pushed
        and the finish is decided. False when there is nowhere safe to go."""
        log.exception("%s: unexpected error while %s", self.spec.name, status.value)
        message = f"runspec error while {status.value}: {type(exc).__name__}: {exc}"
        if status in (RunStatus.PREFLIGHT, RunStatus.STAGING):
            term = (
                Termination.FAILED_PREFLIGHT
                if status is RunStatus.PREFLIGHT
                else Termination.FAILED_STAGING
            )
            self._fail(term, message)
            return True
        if status in (RunStatus.TRAINING, RunStatus.STOPPING):
            handle = TrainerHandle.find(self.paths)
            if handle is not None and handle.alive():
                handle.kill_now()  # nobody would watch it, its budget or its pushes
            self._fail(self.record.termination or Termination.FAILED_TRAINING, message)
            return True
        if status is RunStatus.PUSHING:
            self.say(error(f"the final push broke off: {message}"))
            self._move(RunStatus.FINISHING, message)  # the finish sees it unverified
            return True
        return False

    def _end_early(self, why: str, termination: Termination) -> None:
        """Before training: nothing to stop; push what there is, apply no finish."""
        if self.record.status is RunStatus.QUEUED:
            self._move(RunStatus.FINISHED, f"{why} while queued", termination)
        else:
            self._move(RunStatus.PUSHING, why, termination)

    def _rearm_failsafe(self) -> None:
        if not self.options.owner.runspec:
            return  # nothing here ends the machine (an engine owns it), so no timer may
        failsafe.arm(
            self.spec,
            self.paths,
            self.record,
            clock=self.clock,
            dry_run=self.options.finish_dry_run,
            progress=self.say,
        )

    def _move(self, status: RunStatus, reason: str, termination: Termination | None = None) -> None:
        self.owner.transition(status, reason, termination)

    def _fail(self, termination: Termination, message: str, cause: object = None) -> None:
        self.say(error(f"failed: {message}"))
        self.owner.failed(message, termination, cause)

    def _start(self) -> None:
        now = self.clock.time()
        self.record.started_at = utc_iso(now)
        self.record.deadline = utc_iso(now + self.spec.budget.wall_clock)
        self.record.total_epochs = self.spec.train.epochs
        self._rearm_failsafe()
        self._move(RunStatus.PREFLIGHT, f"started; deadline {self.record.deadline}")

    def _preflight(self) -> None:
        if self.options.skip_preflight:
            self._move(RunStatus.STAGING, "preflight skipped")
            return
        self.say("preflight: checking this machine")
        if self._preflight_phase("machine") is not None:
            self._move(RunStatus.STAGING, "preflight passed")

    def _preflight_phase(self, phase: Phase) -> PreflightReport | None:
        """One phase's checks in their child, said; None when one failed (the run failed)."""
        report = giveup.preflight(self, phase)  # ended at a second signal
        for line in report.said():
            self.say(line)
        if report.failed:
            self._fail(Termination.FAILED_PREFLIGHT, report.first_failure(), report)
            return None
        return report

    def _stage(self) -> None:
        try:
            data_yaml = giveup.staged(self)  # or given up at a second signal
        except GaveUp:
            raise
        except RunspecError as exc:
            self._fail(Termination.FAILED_STAGING, str(exc), exc)
            return
        self.owner.staged(data_yaml)
        checks_data = self.spec.preflight.doctor or self.spec.preflight.profile
        if checks_data and not self.options.skip_preflight:
            report = self._preflight_phase("dataset")
            if report is None:
                return
            self._fit_schedule(report.figure)
        self._move(RunStatus.TRAINING, f"dataset staged at {data_yaml}")

    def _fit_schedule(self, figure: Callable[[str], float | None]) -> None:
        """LibreYOLO's schedule fitted to the budget left: the count the profile check said."""
        left = deadline_of(self.record) - self.clock.time()
        fit = budgetfit.from_figures(self.spec, figure, left)
        if fit is not None and self.record.fit is None:  # a resume keeps the schedule it had
            self.owner.fitted(fit)
            self.say(f"budget: {fit.line()}")

    def pusher(self) -> Pusher | None:
        """The run's pusher, started on first use; None when the spec pushes nowhere."""
        if self.spec.push is None:
            return None
        if self._pusher is None:
            pusher = Pusher(
                self.spec,
                self.paths,
                self.owner,
                clock=self.clock,
                progress=self.say,
                min_interval=self.options.owner.push_min_interval,
                eager=self.options.owner.eager_push,
                timers=self.options.timers or Timers(self.clock),
            )
            pusher.start()
            self._pusher = pusher
        return self._pusher

    def _stop_pusher(self) -> None:
        if self._pusher is not None:  # after a second signal, a push in flight is not waited for
            self._pusher.stop(0.5 if self.requests.aborted.is_set() else 10.0)
            self._pusher = None

    def _train(self) -> None:
        opts = self.options
        parts = RunParts(
            spec=self.spec,
            paths=self.paths,
            owner=self.owner,
            requests=self.requests,
            clock=self.clock,
            say=self.say,
            pusher=self.pusher,
            alerts=self.alerts,
            options=SupervisorOptions(
                opts.tick, opts.stop_grace, opts.hang_floor, opts.first_epoch_hang
            ),
        )
        Supervisor(parts).run()

    def _final_push(self) -> None:
        # So the pushed record carries what the run cost so far.
        self.owner.costed(run_cost(self.record, self.spec.budget.hourly_cost, self.clock.time()))
        handle = TrainerHandle.find(self.paths)
        if handle is None or not handle.alive():
            # No writer is left: every whole checkpoint on the disk is complete, pushed too.
            vouch_after_exit(self.paths.run_dir, self.paths.control_dir, self.clock.time())
        # No weights, nothing to push: no new repo, no card for weights that do not exist.
        pusher = self.pusher() if made_weights(self.paths) else None
        if pusher is None and self.spec.push is not None:
            self.say(warning("no weights were made: nothing pushed, no repo or folder made"))
        pushed = None
        if pusher is not None:
            prepare(self.spec, self.paths, self.record, self.say)  # the curves and the card
            # Past deadline + overrun already: one short, bounded try.
            timeout = max(window_left(self), 15.0)
            self.say(f"final push (at most {human_duration(timeout)} to verify it)")
            signals = FinalPushSignals(self, timeout)
            pushed = push_until_verified(
                pusher, final=True, timeout=timeout, clock=self.clock, give_up=signals
            )
            if pushed is None and signals.gave_up():
                self._move(RunStatus.FINISHED, "the final push was given up at a second signal")
                return
            if pushed is None:
                lost = "final push NOT verified: the weights may exist only on this machine"
                self.say(error(lost))
            else:
                self._stop_pusher()  # the card's commit is the last; none may race it
                push_card(pusher.target, self.paths, self.say, window_left(self))
                send_receipt(
                    self.spec,
                    self.paths,
                    self.record,
                    pusher.target,
                    self.say,
                    window_left(self),
                    self.clock.time(),
                )
        if ended_by_watch(self.spec, self.paths, self.owner, self.clock, self.say):  # one finish
            return
        why = decide_end(self)  # None: moved to finishing, under `runspec cancel`'s lock
        if why is not None:
            nxt = f"no finish action ({why}): the machine is kept"
            said = messages.ended(self.spec, self.paths, self.record, pushed is not None, nxt)
            # Waited for (bounded): `runspec run` ends right after, and its threads with it.
            self.alerts.send_and_wait(said)
            self._move(RunStatus.FINISHED, f"{why}; finish action not applied")

    def _finish(self) -> None:
        if ended_by_watch(self.spec, self.paths, self.owner, self.clock, self.say):  # one finish
            return
        if cancelled_before_finish(self):
            return
        endgame = Endgame(
            self.paths.layout,
            clock=self.clock,
            dry_run=self.options.finish_dry_run,
            say=self.say,
            notify=self.options.notify,
        )
        endgame.finish_run(self.spec, self.paths, self.owner)
        send_end(self.spec, self.paths, self.owner.record.finish, self.say, self.clock.time())
