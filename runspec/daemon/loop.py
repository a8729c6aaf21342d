"""The daemon's main loop: signal flags, the inbox, the queue, systemd.

Signal handlers only set flags. The loop blocks at most `TICK` seconds on the inbox's event
queue, so a new file is picked up at once and flags are seen promptly; it never touches the
network (pushes run in the lifecycle's own threads, the machine's end in its own). The runs
themselves belong to `RunKeeper` (runspec.daemon.runs).
"""

from __future__ import annotations

import functools
import logging
import queue
import signal
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from runspec.clock import SYSTEM, Clock
from runspec.daemon import perms
from runspec.daemon.config import DaemonConfig, load_config
from runspec.daemon.inbox import Inbox, IntakeOutcome
from runspec.daemon.notify import Notifier
from runspec.daemon.runs import RunKeeper
from runspec.daemon.worker import system_stopping
from runspec.run.accept import accept
from runspec.spec.model import Spec
from runspec.store.locks import FileLock
from runspec.store.owner import drop_daemon_pid, take_daemon_lock
from runspec.store.paths import StateLayout
from runspec.store.room import is_unwritable
from runspec.store.state import RecordStore, RunRecord
from runspec.timers import RESCAN_ID, Timers
from runspec.views.statusline import describe
from runspec.voice import error, warning

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
        self.layout = StateLayout(config.state)
        self.store = RecordStore(config.state, clock)
        self.runs = RunKeeper(config, self.store, clock, progress, once)
        self.lock: FileLock | None = None
        self.inbox = Inbox(
            config.inbox,
            config.state,
            self._accept,
            clock=clock,
            incomplete_wait=config.incomplete_wait,
            settle=config.inbox_settle,
        )
        self.timers = Timers(clock)
        self.runs.timers = self.timers
        self.runs.inbox_pending = lambda: bool(self.inbox.pending)
        self.inbox.between = self._watchdog
        self._term = False
        self._hup = False
        self._last_ping = 0.0
        # Reading every record is the loop's only real work: done when something changed.
        self._queue_dirty = True
        self._last_refresh = 0.0
        self._queued_count = 0
        self._read_only: str | None = None  # the error a read-only state folder gave, said once
        self.follower: Any = None  # a runspec.daemon.follow.Follower while one is followed
        self._follow_jobs: list[str] = []

    # -- flags (signal handlers only set these) ------------------------------------------
    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        self._term = True
        self._wake()

    def _on_hup(self, signum: int, frame: FrameType | None) -> None:
        self._hup = True
        self._wake()

    def _wake(self) -> None:
        # The loop blocks on the inbox's queue: a token wakes it now, not a tick later
        # (SimpleQueue.put is safe in a signal handler; the inbox ignores the empty name).
        self.inbox.events.put(("wake", ""))

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
        self.lock = take_daemon_lock(self.layout)
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        signal.signal(signal.SIGHUP, self._on_hup)
        self.timers.every(RESCAN_ID, self.cfg.rescan_every, self.inbox.scan)
        self.runs.rearm_idle_finish()
        self._report(self.inbox.recover_claimed())
        self.inbox.start()
        self._arm_follow()
        self.progress(f"runspecd: watching {self.cfg.inbox} (state {self.cfg.state})")
        self.notifier.ready(self.status_text())

    def _arm_follow(self) -> None:
        """A timed read of each followed repository, the first at once (runspec.daemon.follow);
        with --once, one read before the queue is worked, so its specs are in it."""
        for job_id in self._follow_jobs:
            self.timers.cancel(job_id)
        self._follow_jobs = []
        if self.follower is not None:
            self.follower.close()
        self.follower = None
        if not self.cfg.follow:
            return
        # Here, not at the top: an idle daemon that follows nothing loads no push machinery.
        from runspec.daemon.follow import Follower  # noqa: PLC0415

        self.follower = Follower(
            self.cfg.follow,
            self.cfg.state,
            self.cfg.inbox,
            self.clock,
            self.progress,
            notify=self.cfg.notify,
        )
        for follow in self.cfg.follow:
            if self.once:
                self.follower.poll(follow)
                continue
            job_id = f"follow-{follow.key}"
            job = functools.partial(self.follower.start_poll, follow)
            self.timers.every(job_id, follow.every, job, self.clock.time())
            self._follow_jobs.append(job_id)

    def close(self) -> None:
        if self.follower is not None:
            self.follower.close()
        self.runs.settle_lease()
        self.inbox.stop()
        self.timers.close()
        if self.lock is not None:
            drop_daemon_pid(self.layout)
            self.lock.release()

    def serve(self) -> None:
        """Run until SIGTERM (or, with --once, until nothing is left to do)."""
        self.start()
        try:
            while True:
                if self._term:
                    self._shutdown()
                    return
                self.step()
                if self.once and self._nothing_left():
                    self._summary()
                    return
        finally:
            self.close()

    # -- one pass of the loop -----------------------------------------------------------
    def step(self) -> None:
        waits = [
            TICK,
            self.inbox.next_check_in(),
            self.notifier.watchdog_interval,
            self.timers.next_in(),
        ]
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
        try:
            self._work()
        except OSError as exc:
            if not is_unwritable(exc):
                raise
            # A state folder made read-only is a state to wait out, never the daemon's end:
            # said once, and the loop goes on (the runs' own threads wait it out too).
            if self._read_only is None:
                self.progress(error(f"runspecd: the state folder is read-only ({exc}); waiting"))
            self._read_only = str(exc)
        else:
            if self._read_only is not None:
                self.progress("runspecd: the state folder is writable again")
            self._read_only = None
        self._ping()

    def _work(self) -> None:
        # The timed jobs (the rescan, the idle finish) run here, in the loop's own thread.
        self.timers.run_due()
        self._report(self.inbox.process())
        if self.runs.handle_cancels() or self.runs.reap():
            self._queue_dirty = True
        now = self.clock.monotonic()
        if self._queue_dirty or now - self._last_refresh >= REFRESH_EVERY:
            self._queue_dirty = False
            self._last_refresh = now
            self._queued_count = self.runs.refresh()

    def _ping(self) -> None:
        self._watchdog()
        self.notifier.status(self.status_text())

    def _watchdog(self) -> None:
        """The watchdog ping when one is due: also between the inbox's files, so that a
        burst of large specs never holds the loop past WatchdogSec."""
        interval = self.notifier.watchdog_interval
        now = self.clock.monotonic()
        if interval is not None and now - self._last_ping >= interval:
            self.notifier.watchdog()
            self._last_ping = now

    def status_text(self) -> str:
        worker = self.runs.worker
        record = worker.record if worker else None
        problem = f"; inbox: {self.inbox.problem}" if self.inbox.problem else ""
        return describe(record, self.clock.time(), self._queued_count) + problem

    def _report(self, outcomes: list[IntakeOutcome]) -> None:
        for outcome in outcomes:
            self._queue_dirty = True
            if outcome.accepted:
                self.progress(f"{outcome.accepted}: queued (from {outcome.file})")
            elif outcome.rejected:
                # A refusal is a warning: `journalctl -p warning` and `runspec status` show it.
                first = outcome.reason.splitlines()[0] if outcome.reason else ""
                where = f"{outcome.file} -> {outcome.rejected}"
                self.progress(warning(f"inbox: rejected {where}: {first}"))

    def _reload(self) -> None:
        self.progress("runspecd: SIGHUP: reloading the config and rescanning the inbox")
        self.notifier.reloading()
        try:
            fresh = load_config(self.config_path, state=self.cfg.state, inbox=self.cfg.inbox)
            self.cfg = replace(
                fresh, finish_dry_run=self.cfg.finish_dry_run or fresh.finish_dry_run
            )
            self.runs.cfg = self.cfg
            self.inbox.incomplete_wait = self.cfg.incomplete_wait
            self.inbox.settle = self.cfg.inbox_settle
            self.timers.every(RESCAN_ID, self.cfg.rescan_every, self.inbox.scan)
            self._arm_follow()
        except Exception as exc:  # a bad edit keeps the old config running
            self.progress(error(f"runspecd: config reload failed, keeping the old one: {exc}"))
        self.inbox.scan()
        self.notifier.ready(self.status_text())

    def _accept(
        self, spec: Spec, state: Path, provenance: dict[str, Any] | None, clock: Clock
    ) -> RunRecord:
        return accept(spec, state, provenance, clock, runs=self.cfg.runs, data=self.cfg.data)

    def _nothing_left(self) -> bool:
        return (
            self.runs.worker is None
            and not self.runs.ending
            and not self.inbox.pending
            and self.inbox.events.empty()
            and not self._queue_dirty
            and not [r for r in self.store.all() if self.runs.waiting(r)]
        )

    def _shutdown(self) -> None:
        self.notifier.stopping()
        worker = self.runs.worker
        if worker is None:
            log.info("SIGTERM: nothing running; exiting")
            return
        # Every stop (`runspec daemon --stop`, `systemctl stop`, a system shutdown) pushes the
        # newest checkpoint first: the trainer trains on with nobody to push it until a daemon
        # drives it again, and the box may never come back.
        why = "the system is stopping" if system_stopping() else "the daemon is stopping"
        self.progress(f"{worker.name}: {why}; pushing the newest checkpoint")
        asked = worker.requests.push_now()
        # Answered at once when the run is not training: no push to wait for.
        if not asked.done.wait(self.cfg.shutdown_push_timeout) or asked.note:
            self.progress(f"{worker.name}: {asked.note or 'the push did not finish in time'}")
        worker.requests.detach()
        worker.thread.join(timeout=DETACH_WAIT)
        self.progress(f"{worker.name}: state saved; the trainer keeps running, detached")

    def _summary(self) -> None:
        """--once ends with what each run came to: the last lines a person reads."""
        for name in sorted(self.runs.retry):
            record = self.store.load(name)
            status = record.status.value if record else "unknown"
            self.progress(error(f"{name}: NOT finished (stuck at {status}; see the lines above)"))
        if not self.runs.ended and not self.runs.retry:
            self.progress("runspecd: nothing to do: the queue is empty")
        for record in self.runs.ended:
            self.runs.say_summary(record)


def main(
    config: DaemonConfig, config_path: Path | None, once: bool, say: Callable[[str], None]
) -> None:
    """Serve until SIGTERM (or, with `once`, until nothing is left); `say` is the stream
    people read (runspec.voice: escaped, with the journal's priorities)."""
    daemon = Daemon(config, config_path=config_path, once=once, progress=say)
    try:
        daemon.serve()
    finally:
        sys.stdout.flush()
