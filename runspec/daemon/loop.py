"""The daemon's main loop: signal flags, the inbox, the queue, one worker, systemd.

Signal handlers only set flags. The loop blocks at most `TICK` seconds on the inbox's event
queue, so a new file is picked up at once and flags are seen promptly; it never touches the
network (pushes run in the lifecycle's own threads).
"""

from __future__ import annotations

import logging
import queue
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from runspec.clock import SYSTEM, Clock, human_duration
from runspec.daemon import jobs, perms
from runspec.daemon import queue as runqueue
from runspec.daemon.config import DaemonConfig, load_config
from runspec.daemon.inbox import Inbox, Outcome
from runspec.daemon.lock import StateLock
from runspec.daemon.notify import Notifier
from runspec.daemon.statusline import describe, summary
from runspec.daemon.worker import Worker, system_stopping
from runspec.model import Spec
from runspec.paths import RunPaths, resolve_under
from runspec.state import RecordStore, RunRecord, RunStatus, Termination

log = logging.getLogger("runspec.daemon")

TICK = 1.0  # the longest the loop sleeps: how late a signal flag or a cancel is seen
REFRESH_EVERY = 10.0  # re-read the queue from disk this often even when nothing happened
DETACH_WAIT = 30.0  # the longest wait for the worker to save state after detach


class Daemon:
    def __init__(
        self,
        config: DaemonConfig,
        *,
        config_path: Path | None = None,
        once: bool = False,
        clock: Clock = SYSTEM,
        notifier: Notifier | None = None,
        progress: Callable[[str], None] = print,
    ) -> None:
        self.cfg = config
        self.config_path = config_path
        self.once = once
        self.clock = clock
        self.notifier = notifier or Notifier()
        self.progress = progress
        self.store = RecordStore(config.state, clock)
        self.lock = StateLock(config.state)
        self.inbox = Inbox(
            config.inbox, config.state, self._accept, clock=clock,
            incomplete_wait=config.incomplete_wait,
        )  # fmt: skip
        self.scheduler: Any = None
        self.worker: Worker | None = None
        self.broken: set[str] = set()  # runs whose lifecycle raised: not retried by this process
        self.ran_any = False
        self.ended: list[RunRecord] = []
        self._term = False
        self._hup = False
        self._last_ping = 0.0
        # Reading every record is the loop's only real work: done when something changed.
        self._queue_dirty = True
        self._last_refresh = 0.0
        self._queued_count = 0
        self._idle_thread: threading.Thread | None = None

    # -- flags (signal handlers only set these) ------------------------------------------
    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        self._term = True

    def _on_hup(self, signum: int, frame: FrameType | None) -> None:
        self._hup = True

    # -- start and stop -------------------------------------------------------------------
    def check_permissions(self) -> None:
        paths = [self.cfg.inbox, self.cfg.state]
        if self.cfg.source is not None:
            paths.append(self.cfg.source)
        perms.check(paths)

    def start(self) -> None:
        for folder in (self.cfg.state, self.cfg.inbox):
            if not folder.exists():
                folder.mkdir(parents=True, mode=0o700)
        self.check_permissions()
        self.lock.acquire()
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        signal.signal(signal.SIGHUP, self._on_hup)
        self.scheduler = jobs.make_scheduler(self.cfg.scheduler_db)
        jobs.register(self.scheduler, self.cfg.rescan_every)
        self.scheduler.start()
        self._report(self.inbox.recover_claimed())
        self.inbox.start()
        log.info("runspecd watching %s (state %s)", self.cfg.inbox, self.cfg.state)
        self.notifier.ready(self.status_text())

    def close(self) -> None:
        self.inbox.stop()
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=False)
        self.lock.release()

    def serve(self) -> int:
        """Run until SIGTERM (or, with --once, until nothing is left to do)."""
        self.start()
        try:
            while True:
                if self._term:
                    self._shutdown()
                    return 0
                self.step()
                if self.once and self._nothing_left():
                    self._summary()
                    return 0
        finally:
            self.close()

    # -- one pass of the loop -----------------------------------------------------------
    def step(self) -> None:
        waits = [TICK, self.inbox.next_check_in(), self.notifier.watchdog_interval]
        timeout = min(w for w in waits if w is not None)
        try:
            kind, name = self.inbox.events.get(timeout=timeout)
            self.inbox.note(kind, name)
        except queue.Empty:  # nothing happened within the tick
            pass
        if self._hup:
            self._hup = False
            self._queue_dirty = True
            self._reload()
        if jobs.RESCAN_DUE.is_set():
            jobs.RESCAN_DUE.clear()
            self.inbox.scan()
        self._report(self.inbox.process())
        self._handle_cancels()
        self._reap()
        now = self.clock.monotonic()
        if self._queue_dirty or now - self._last_refresh >= REFRESH_EVERY:
            self._queue_dirty = False
            self._last_refresh = now
            self._queued_count = len(runqueue.queued(self.store))
            if self.worker is None:
                self._start_next()
        if jobs.IDLE_FINISH_DUE.is_set():
            jobs.IDLE_FINISH_DUE.clear()
            self._start_idle_finish()
        self._ping()

    def _ping(self) -> None:
        interval = self.notifier.watchdog_interval
        now = self.clock.monotonic()
        if interval is not None and now - self._last_ping >= interval:
            self.notifier.watchdog()
            self._last_ping = now
        self.notifier.status(self.status_text())

    def status_text(self) -> str:
        record = self.worker.record if self.worker else None
        return describe(record, self.clock.time(), self._queued_count)

    def _report(self, outcomes: list[Outcome]) -> None:
        for outcome in outcomes:
            self._queue_dirty = True
            if outcome.accepted:
                self.progress(f"queued {outcome.accepted} (from {outcome.file})")
            elif outcome.rejected:
                first = outcome.reason.splitlines()[0] if outcome.reason else ""
                self.progress(f"rejected {outcome.file} -> {outcome.rejected}: {first}")

    def _reload(self) -> None:
        log.info("SIGHUP: reloading the config and rescanning the inbox")
        self.notifier.reloading()
        try:
            fresh = load_config(self.config_path, state=self.cfg.state, inbox=self.cfg.inbox)
            self.cfg = replace(
                fresh, finish_dry_run=self.cfg.finish_dry_run or fresh.finish_dry_run
            )
            self.inbox.incomplete_wait = self.cfg.incomplete_wait
            jobs.register(self.scheduler, self.cfg.rescan_every)
        except Exception as exc:  # a bad edit keeps the old config running
            log.error("config reload failed, keeping the old one: %s", exc)
        self.inbox.scan()
        self.notifier.ready(self.status_text())

    # -- runs -----------------------------------------------------------------------------
    def _accept(
        self, spec: Spec, state: Path, provenance: dict[str, Any] | None, clock: Clock
    ) -> RunRecord:
        from runspec.accept import accept

        return accept(spec, state, provenance, clock)

    def paths_for(self, spec: Spec) -> RunPaths:
        state = self.cfg.state
        project = resolve_under(state, spec.output.project) or self.cfg.runs
        data_root = resolve_under(state, spec.dataset.extract_to) or self.cfg.data
        return RunPaths(state=state, name=spec.name, project=project, data_root=data_root)

    def load_spec(self, name: str) -> Spec:
        from runspec.loader import load_spec

        return load_spec(self.cfg.state / "jobs" / name / "spec.yaml")

    def _lifecycle(self, record: RunRecord) -> Any:
        from runspec.lifecycle import Lifecycle, LifecycleOptions

        spec = self.load_spec(record.name)
        options = LifecycleOptions(
            finish=True,
            finish_dry_run=self.cfg.finish_dry_run,
            progress=self._run_progress(record.name),
            defer_finish=lambda: bool(runqueue.queued(self.store)),
        )
        return Lifecycle(spec, self.paths_for(spec), self.store, options, clock=self.clock)

    def _run_progress(self, name: str) -> Callable[[str], None]:
        def progress(line: str) -> None:
            # The lifecycle's progress is what people read: stdout, so the journal under systemd.
            self.progress(f"{name}: {line}")

        return progress

    def _start_next(self) -> None:
        candidates = runqueue.in_flight(self.store) + runqueue.queued(self.store)
        for record in candidates:
            if record.name in self.broken:
                continue
            try:
                lifecycle = self._lifecycle(record)
            except Exception as exc:
                log.error("run %s cannot start: %s", record.name, exc)
                self.broken.add(record.name)
                continue
            if self.scheduler is not None:
                jobs.disarm_idle_finish(self.scheduler)
            verb = "resuming" if record.status is not RunStatus.QUEUED else "starting"
            self.progress(f"{verb} {record.name} ({record.status.value})")
            self.worker = Worker(lifecycle)
            self.worker.thread.start()
            self.ran_any = True
            return
        if not candidates:
            self._apply_deferred_finish()

    def _reap(self) -> None:
        worker = self.worker
        if worker is None or worker.thread.is_alive():
            return
        worker.thread.join()
        self.worker = None
        self._queue_dirty = True
        record = worker.record
        runqueue.clear_cancel(self.cfg.state, record.name)
        if worker.error is not None or record.status is not RunStatus.FINISHED:
            self.broken.add(record.name)
        if record.status is RunStatus.FINISHED:
            self.ended.append(record)
            ended = record.termination.value if record.termination else "ended"
            self.progress(f"{record.name}: finished ({ended}): {record.reason}")
            self._arm_idle_finish()

    def _handle_cancels(self) -> None:
        jobs_dir = self.cfg.state / "jobs"
        for path in jobs_dir.glob(f"*/{runqueue.CANCEL_FILE}"):
            name = path.parent.name
            self._queue_dirty = True
            if self.worker is not None and self.worker.name == name:
                if not self.worker.lifecycle.cancel_requested.is_set():
                    self.progress(f"{name}: cancel requested; stopping at the next epoch boundary")
                    self.worker.lifecycle.cancel()
                continue
            record = self.store.load(name)
            if record is not None and record.status is RunStatus.QUEUED:
                self.store.transition(
                    record, RunStatus.FINISHED, "cancelled while queued", Termination.CANCELLED
                )
                self._arm_idle_finish()
                self.progress(f"{name}: cancelled while queued")
            if record is None or record.status is RunStatus.FINISHED:
                path.unlink(missing_ok=True)

    def _apply_deferred_finish(self) -> None:
        """Once nothing is queued, the last run that deferred a machine-ending finish gets it."""
        deferred = [
            r
            for r in self.store.all()
            if r.status is RunStatus.FINISHED and r.finish.get("deferred") is True
        ]
        if not deferred:
            return
        deferred.sort(key=lambda r: r.ended_at or "")
        for older in deferred[:-1]:
            older.finish = {"deferred": False, "superseded_by": deferred[-1].name}
            self.store.save(older)
        last = deferred[-1]
        last.finish = {"deferred": "applying"}
        self.store.save(last)
        try:
            lifecycle = self._lifecycle(last)
        except Exception as exc:
            log.error("cannot apply the deferred finish of %s: %s", last.name, exc)
            return
        self.progress(f"{last.name}: queue empty; applying its deferred finish")
        self.worker = Worker(lifecycle, target=lambda: lifecycle.finish_deferred(self.load_spec))
        self.worker.thread.start()

    def _arm_idle_finish(self) -> None:
        if self.cfg.idle_finish is None or self.scheduler is None or self.once:
            return
        at = self.clock.time() + self.cfg.idle_finish
        jobs.arm_idle_finish(self.scheduler, at)
        log.info("idle finish armed: %s in %s", self.cfg.finish.action.value,
                 human_duration(self.cfg.idle_finish))  # fmt: skip

    def _start_idle_finish(self) -> None:
        # A finish may call a provider's API: never on the main loop, which must keep pinging.
        if self._idle_thread is not None and self._idle_thread.is_alive():
            return
        self._idle_thread = threading.Thread(target=self._idle_finish_logged, name="idle-finish")
        self._idle_thread.daemon = True
        self._idle_thread.start()

    def _idle_finish_logged(self) -> None:
        try:
            self._idle_finish()
        except Exception:  # the daemon outlives a failed idle finish; the log says why
            log.exception("the idle finish failed")

    def _idle_finish(self) -> None:
        if self.worker is not None or runqueue.queued(self.store) or self.inbox.pending:
            return  # something arrived meanwhile; the next run's end re-arms it
        ended = [r for r in self.store.all() if r.status is RunStatus.FINISHED and r.ended_at]
        if not ended:
            return
        last = max(ended, key=lambda r: r.ended_at or "")
        from runspec.finish import apply_finish
        from runspec.verdict import machine_weights_safe

        spec = replace(self.load_spec(last.name), finish=self.cfg.finish)
        # The idle finish acts for the whole machine: every run that trained here counts.
        safe, why = machine_weights_safe(self.store, self.load_spec)
        self.progress(f"idle finish: {why}")
        self.progress(f"idle for {human_duration(self.cfg.idle_finish or 0)}: "
                      f"applying the idle finish ({self.cfg.finish.action.value})")  # fmt: skip
        result = apply_finish(
            spec,
            last,
            verified=safe,
            dry_run=self.cfg.finish_dry_run,
            clock=self.clock,
            log=self.progress,
        )
        last.finish = {**last.finish, "idle_finish": result.to_json()}
        self.store.save(last)

    def _nothing_left(self) -> bool:
        return (
            self.worker is None
            and not self.inbox.pending
            and self.inbox.events.empty()
            and not [r for r in runqueue.queued(self.store) if r.name not in self.broken]
            and not [r for r in runqueue.in_flight(self.store) if r.name not in self.broken]
        )

    def _shutdown(self) -> None:
        self.notifier.stopping()
        worker = self.worker
        if worker is None:
            log.info("SIGTERM: nothing running; exiting")
            return
        lc = worker.lifecycle
        if system_stopping():
            self.progress(f"{worker.name}: the system is stopping; pushing the newest checkpoint")
            lc.shutdown_push()
            deadline = self.clock.monotonic() + self.cfg.shutdown_push_timeout
            # The supervisor clears the flag when it starts the push, and sees detach after it.
            while lc.shutdown_push_requested.is_set() and self.clock.monotonic() < deadline:
                self.clock.sleep(0.1)
            lc.detach()
            worker.thread.join(timeout=max(deadline - self.clock.monotonic(), 1.0))
        else:
            lc.detach()
            worker.thread.join(timeout=DETACH_WAIT)
        self.progress(f"{worker.name}: state saved; the trainer keeps running")

    def _summary(self) -> None:
        for name in sorted(self.broken):
            record = self.store.load(name)
            status = record.status.value if record else "unknown"
            self.progress(f"summary {name}: NOT finished (stuck at {status}; see the log above)")
        if not self.ended and not self.broken:
            self.progress("nothing to do: the queue is empty")
        for record in self.ended:
            self.progress(summary(record))


def main(config: DaemonConfig, config_path: Path | None, once: bool) -> int:
    def progress(line: str) -> None:
        print(line, flush=True)

    daemon = Daemon(config, config_path=config_path, once=once, progress=progress)
    try:
        return daemon.serve()
    finally:
        sys.stdout.flush()
