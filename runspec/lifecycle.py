"""One run, from the queue to the end of billing: the code `runspec run` and the daemon share.

    queued -> preflight -> staging -> training -> stopping -> pushing -> finishing -> finished

Every phase reads and writes the persisted run record, so `run()` can be entered again after a
restart at whatever status the record holds: a live trainer is re-attached, a dead one resumed
or ended, a pending final push or finish carried out. Nothing here imports torch: the heavy
work happens in child programs (preflight, synthetic data, trainer).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runspec.clock import SYSTEM, Clock, parse_utc_iso, utc_iso
from runspec.errors import RunspecError
from runspec.model import FinishAction, Spec
from runspec.paths import RunPaths
from runspec.state import PushRecord, RecordStore, RunRecord, RunStatus, Termination
from runspec.verdict import final_push_verified, machine_weights_safe

if TYPE_CHECKING:
    from runspec.preflight import PreflightReport
    from runspec.push import Pusher

log = logging.getLogger("runspec.lifecycle")

NO_FINISH = frozenset({Termination.CANCELLED, Termination.INTERRUPTED})


@dataclass(frozen=True)
class LifecycleOptions:
    finish: bool = True
    finish_dry_run: bool = False
    progress: Callable[[str], None] = print
    # The daemon defers a machine-ending finish while other specs wait (spec-v1.md).
    defer_finish: Callable[[], bool] = field(default=lambda: False)
    tick: float = 0.5  # how often the trainer's folder is read
    preflight_timeout: float = 900.0
    stop_grace: float = 3600.0  # the longest wait for an epoch boundary after a stop request
    hang_floor: float = 600.0  # no new epoch for max(5 x longest epoch, this): hung
    first_epoch_hang: float = 3600.0
    push_min_interval: float = 60.0  # the Hub limits commit rates
    skip_preflight: bool = False
    # The daemon's EnvironmentFile: a trainer started as its own systemd unit reads the same
    # secrets (HF_TOKEN) from it, never from its command line.
    environment_file: Path | None = Path("/etc/runspec/env")


class Lifecycle:
    def __init__(
        self,
        spec: Spec,
        paths: RunPaths,
        store: RecordStore,
        options: LifecycleOptions | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        record = store.load(spec.name)
        if record is None:
            raise RunspecError(f"run {spec.name!r} was never accepted (no record)")
        self.spec = spec
        self.paths = paths
        self.store = store
        self.options = options or LifecycleOptions()
        self.clock = clock
        self.record = record
        self.cancel_requested = threading.Event()
        self.interrupt_requested = threading.Event()
        self.abort_requested = threading.Event()
        self.detach_requested = threading.Event()
        self.shutdown_push_requested = threading.Event()
        self._pusher: Pusher | None = None

    # Requests from other threads (signal flags, the daemon's loop); each only sets a flag.
    def cancel(self) -> None:
        self.cancel_requested.set()

    def interrupt(self) -> None:
        """SIGINT/SIGTERM to `runspec run`: push now, stop at the boundary, no finish."""
        if self.interrupt_requested.is_set():
            self.abort_requested.set()
        self.interrupt_requested.set()

    def detach(self) -> None:
        self.detach_requested.set()

    def shutdown_push(self) -> None:
        self.shutdown_push_requested.set()

    def say(self, line: str) -> None:
        """Tell the person watching, and keep it in the run's own log (pushed with it)."""
        # Progress is the channel people read (stdout, the journal); the log keeps it at debug
        # level so the daemon's journal does not show every line twice.
        log.debug("%s: %s", self.spec.name, line)
        self.options.progress(line)
        try:
            self.paths.job_dir.mkdir(parents=True, exist_ok=True)
            with open(self.paths.job_dir / "runspec.log", "a") as fh:
                fh.write(f"{utc_iso(self.clock.time())} {line}\n")
        except OSError as exc:
            log.warning("%s: cannot write runspec.log: %s", self.spec.name, exc)

    def _note_cost(self) -> None:
        from runspec.cost import run_cost

        cost = run_cost(self.record, self.spec.budget.hourly_cost, self.clock.time())
        self.record.cost = cost.to_json()
        self.store.save(self.record)

    # The phases.
    def run(self) -> RunRecord:
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
        try:
            while self.record.status is not RunStatus.FINISHED:
                if self.detach_requested.is_set():
                    self.say("detached; the trainer keeps running")
                    break
                if self.abort_requested.is_set():
                    self.say("second signal: exiting now")
                    break
                if self.interrupt_requested.is_set() and self.record.status in (
                    RunStatus.PREFLIGHT,
                    RunStatus.STAGING,
                ):
                    self._move(RunStatus.PUSHING, "interrupted", Termination.INTERRUPTED)
                    continue
                status = self.record.status
                try:
                    steps[status]()
                except Exception as exc:
                    # A bug or a full disk must not strand the run: its weights still get
                    # pushed and the machine's finish still decided. Once per status.
                    if status in failed_in or not self._recover(status, exc):
                        raise
                    failed_in.add(status)
        finally:
            self._stop_pusher()
        if self.record.status is RunStatus.FINISHED:
            from runspec import failsafe

            failsafe.disarm(self.spec, self.paths, progress=self.say)
        return self.record

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
            from runspec.launcher import TrainerHandle

            handle = TrainerHandle.load(self.paths)
            if handle is not None and handle.alive():
                handle.kill_now()  # nobody would watch it, its budget or its pushes
            self._fail(self.record.termination or Termination.FAILED_TRAINING, message)
            return True
        if status is RunStatus.PUSHING:
            self.say(f"the final push broke off: {message}")
            self._move(RunStatus.FINISHING, message)  # the finish sees it unverified
            return True
        return False

    def _rearm_failsafe(self) -> None:
        from runspec import failsafe

        failsafe.arm(
            self.spec,
            self.paths,
            self.record,
            clock=self.clock,
            dry_run=self.options.finish_dry_run,
            progress=self.say,
        )

    def _move(self, status: RunStatus, reason: str, termination: Termination | None = None) -> None:
        self.store.transition(self.record, status, reason, termination)

    def _fail(self, termination: Termination, message: str) -> None:
        self.say(f"failed: {message}")
        self._move(RunStatus.PUSHING, message, termination)

    def _start(self) -> None:
        now = self.clock.time()
        self.record.started_at = utc_iso(now)
        self.record.deadline = utc_iso(now + self.spec.budget.wall_clock)
        self.record.total_epochs = self.spec.train.epochs
        self._rearm_failsafe()
        self._move(RunStatus.PREFLIGHT, f"started; deadline {self.record.deadline}")

    def deadline(self) -> float:
        assert self.record.deadline is not None
        return parse_utc_iso(self.record.deadline)

    def _preflight(self) -> None:
        if self.options.skip_preflight:
            self._move(RunStatus.STAGING, "preflight skipped")
            return
        from runspec.preflight import run_preflight

        self.say("preflight: checking this machine")
        report = run_preflight(
            self.spec, self.paths, "machine", timeout=self.options.preflight_timeout
        )
        self.options.progress(report.render_text())
        if report.failed:
            self._fail(Termination.FAILED_PREFLIGHT, _first_failure(report))
            return
        self._move(RunStatus.STAGING, "preflight passed")

    def _stage(self) -> None:
        from runspec.staging import stage_dataset

        try:
            data_yaml = stage_dataset(self.spec, self.paths, progress=self.say)
        except RunspecError as exc:
            self._fail(Termination.FAILED_STAGING, str(exc))
            return
        self.record.data_yaml = str(data_yaml)
        self.store.save(self.record)
        checks_data = self.spec.preflight.doctor or self.spec.preflight.profile
        if checks_data and not self.options.skip_preflight:
            from runspec.preflight import run_preflight

            report = run_preflight(
                self.spec, self.paths, "dataset", timeout=self.options.preflight_timeout
            )
            self.options.progress(report.render_text())
            if report.failed:
                self._fail(Termination.FAILED_PREFLIGHT, _first_failure(report))
                return
        self._move(RunStatus.TRAINING, f"dataset staged at {data_yaml}")

    def pusher(self) -> Pusher | None:
        """The run's pusher, started on first use; None when the spec pushes nowhere."""
        if self.spec.push is None:
            return None
        if self._pusher is None:
            from runspec.push import Pusher

            pusher = Pusher(
                self.spec,
                self.paths,
                self.store,
                self.record,
                clock=self.clock,
                progress=self.say,
                min_interval=self.options.push_min_interval,
            )
            pusher.start()
            self._pusher = pusher
        return self._pusher

    def _stop_pusher(self) -> None:
        if self._pusher is not None:
            self._pusher.stop()
            self._pusher = None

    def _train(self) -> None:
        from runspec.supervise import Supervisor

        Supervisor(self).run()

    def _final_push(self) -> None:
        self._note_cost()  # so the pushed record carries what the run cost so far
        pusher = self.pusher()
        if pusher is not None:
            remaining = self.deadline() + self.spec.budget.overrun - self.clock.time()
            # Past deadline + overrun already: one short, bounded try.
            timeout = max(remaining, 15.0)
            self.say(f"final push (waiting at most {timeout:.0f} s for it to be verified)")
            pushed = push_until_verified(
                pusher,
                final=True,
                timeout=timeout,
                clock=self.clock,
                give_up=self.abort_requested,
            )
            if pushed is None:
                self.say("final push NOT verified: the weights may exist only on this machine")
        term = self.record.termination or Termination.COMPLETED
        if term in NO_FINISH or not self.options.finish:
            self._move(RunStatus.FINISHED, f"{term.value}; finish action not applied")
        elif self.options.defer_finish() and _ends_machine(self.spec):
            self.record.finish = {"deferred": True}
            self._move(RunStatus.FINISHED, f"{term.value}; finish deferred to the last queued run")
        else:
            self._move(RunStatus.FINISHING, f"{term.value}; applying the finish action")

    def _finish(self, others_safe: bool = True) -> None:
        from runspec.finish import apply_finish

        result = apply_finish(
            self.spec,
            self.record,
            verified=final_push_verified(self.spec, self.record) and others_safe,
            dry_run=self.options.finish_dry_run,
            clock=self.clock,
            log=self.say,
        )
        self.record.finish = result.to_json()
        self._move(RunStatus.FINISHED, f"finish: {result.summary}")
        self._note_cost()

    def finish_deferred(self, load: Callable[[str], Spec]) -> None:
        """The daemon applies a deferred machine-ending finish once the queue is empty: only
        as verified when the runs that came after this one are verified too."""
        safe, why = machine_weights_safe(self.store, load)
        self.say(f"deferred finish: {why}")
        self._move(RunStatus.FINISHING, "applying the deferred finish action")
        self._finish(others_safe=safe)


def push_until_verified(
    pusher: Pusher,
    *,
    final: bool,
    timeout: float,
    clock: Clock,
    give_up: threading.Event | None = None,
) -> PushRecord | None:
    """Push, and push again after a failure (a dropped connection, a 500 the client gave up
    on), with a growing pause, until one is verified, `timeout` passed or `give_up` is set."""
    end = clock.monotonic() + timeout
    pause = 1.0
    while True:
        left = end - clock.monotonic()
        pushed = pusher.push_now(final=final, timeout=max(left, 1.0))
        if pushed is not None:
            return pushed
        left = end - clock.monotonic()
        if left <= pause or (give_up is not None and give_up.is_set()):
            return None
        clock.sleep(pause)
        pause = min(pause * 2, 30.0)


def _ends_machine(spec: Spec) -> bool:
    return spec.finish.action in (
        FinishAction.DESTROY,
        FinishAction.STOP,
        FinishAction.AUTO,
        FinishAction.POWEROFF,
    )


def _first_failure(report: PreflightReport) -> str:
    for check in report.checks:
        if check.status == "fail":
            fix = f" ({check.fix})" if check.fix else ""
            return f"{check.name}: {check.message}{fix}"
    return "a check failed"
