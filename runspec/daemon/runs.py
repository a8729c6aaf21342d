"""The daemon's runs: one at a time, first come first served, each driven under its owner lock.

A run whose lifecycle broke is tried again after a growing pause, never given up for good (a
full disk that filled for a while must not strand a run); a run another process drives is left
to it. Damaged records are set aside so the other runs go on. The machine's end belongs to
runspec.machine.endgame: this only arms the idle finish and enters the endgame, in a thread, when no
run is left to drive.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runspec.backoff import pause_after
from runspec.clock import Clock, human_duration, parse_utc_iso
from runspec.daemon import queue as runqueue
from runspec.daemon.config import DaemonConfig
from runspec.daemon.worker import Worker
from runspec.errors import RunspecError
from runspec.machine.machinefile import load_pending
from runspec.spec.loader import load_accepted
from runspec.spec.model import FinishAction
from runspec.store.hint import command
from runspec.store.owner import RunLock
from runspec.store.paths import StateLayout
from runspec.store.state import Damaged, RecordStore, RunRecord, RunStatus, Termination
from runspec.timers import IDLE_FINISH_ID, Timers
from runspec.voice import error, like, tagged

if TYPE_CHECKING:
    from runspec.machine.endgame import Endgame
    from runspec.run.driver import RunDrive

# The run machinery (the lifecycle, the push, the endgame, the providers' HTTP) is imported
# where a run starts or the machine ends, not with the daemon: an idle daemon holds about
# 6 MB less (bench/bench_daemon.py), and the first run pays the import once.

log = logging.getLogger("runspec.daemon")

RETRY_FIRST_S = 10.0
RETRY_MAX_S = 600.0
ONCE_ATTEMPTS = 3  # with --once, a run that keeps breaking is left after this many tries


@dataclass
class Retry:
    attempts: int = 0
    at: float = 0.0  # monotonic


class RunKeeper:
    def __init__(
        self,
        cfg: DaemonConfig,
        store: RecordStore,
        clock: Clock,
        progress: Callable[[str], None],
        once: bool,
    ) -> None:
        self.cfg = cfg
        self.store = store
        self.layout = StateLayout(cfg.state)
        self.clock = clock
        self.progress = progress
        self.once = once
        self.worker: Worker | None = None
        self.retry: dict[str, Retry] = {}
        self.elsewhere: dict[str, str] = {}  # runs driven by another process, and by whom
        self.ended: list[RunRecord] = []
        self.set_aside: set[str] = set()
        self.unbuildable: set[str] = set()  # damaged under a live trainer, and not rebuilt
        # Runs not finished at the last refresh: the only ones a cancel can still reach, so a
        # step's cost does not grow with the finished runs of the state folder. None until
        # the first refresh: then every run is looked at, so a cancel left while no daemon ran
        # is seen before the queue starts anything.
        self.unfinished: list[str] | None = None
        self.timers: Timers | None = None  # the daemon's; None: no idle finish (tests)
        self.inbox_pending: Callable[[], bool] = lambda: False
        self._endgame_thread: threading.Thread | None = None
        self.drive: RunDrive | None = None  # the driven run's parts (runspec.run.driver)
        self._lease_final: threading.Thread | None = None

    # -- the queue ----------------------------------------------------------------------
    def refresh(self) -> int:
        """Set damaged records aside, start the next run if none runs; the queue's length."""
        scan = self.store.scan()
        if self._rebuild_live(scan.damaged):
            scan = self.store.scan()
        for bad in scan.damaged:
            if bad.name not in self.set_aside and not bad.kept_as:
                kept = self.store.set_aside(bad.name, bad.reason)
                self.progress(
                    error(
                        f"{bad.name}: its record is damaged ({bad.reason}); set aside as "
                        f"{kept.kept_as}; the other runs go on, and nothing ends this machine "
                        f"until it is looked at "
                        f"(`{command(f'rm {bad.name}', self.layout.state)}` once it is)"
                    )
                )
            self.set_aside.add(bad.name)
        self.unfinished = [r.name for r in scan.records if r.status is not RunStatus.FINISHED]
        queued = runqueue.queued(self.store, scan.records)
        if self.worker is None:
            self._start_next(runqueue.in_flight(self.store, scan.records) + queued)
        return len(queued)

    def _rebuild_live(self, damaged: list[Damaged]) -> bool:
        """A damaged run whose trainer is alive gets a record rebuilt from its job folder, so
        it is driven to its end (its newest checkpoints pushed) instead of left unsupervised;
        True when one was."""
        done = False
        for bad in damaged:
            if self.worker is not None and self.worker.name == bad.name:
                continue  # its driver holds the record and saves it again
            from runspec.run.rebuild import rebuild  # noqa: PLC0415 - the run machinery

            try:
                record = rebuild(self.store, self.layout, bad)
            except RunspecError as exc:
                if bad.name not in self.unbuildable:  # said once, not at every refresh
                    self.unbuildable.add(bad.name)
                    self.progress(error(f"{bad.name}: its record cannot be rebuilt: {exc}"))
                continue
            if record is None:
                continue
            done = True
            self.set_aside.discard(bad.name)
            kept = self.store.damaged(bad.name)
            self.progress(
                error(
                    f"{bad.name}: its record is damaged ({bad.reason}) but its trainer is alive: "
                    f"rebuilt from its job folder (the damaged file kept as "
                    f"{kept.kept_as if kept else bad.kept_as}); driven to its end, and this "
                    "machine is stopped, never destroyed, until it is looked at"
                )
            )
        return done

    def _runnable(self, record: RunRecord) -> bool:
        retry = self.retry.get(record.name)
        if retry is None:
            return True
        if self.once and retry.attempts >= ONCE_ATTEMPTS:
            return False
        return self.clock.monotonic() >= retry.at

    def _start_next(self, candidates: list[RunRecord]) -> None:
        for record in candidates:
            if not self._runnable(record):
                continue
            paths = self.layout.run_paths(record.name)
            lock = RunLock(paths)
            other = lock.try_acquire()
            if other is not None:
                if self.elsewhere.get(record.name) != str(other):
                    self.elsewhere[record.name] = str(other)
                    self.progress(f"{record.name}: driven by {other}; left to it")
                continue
            self.elsewhere.pop(record.name, None)
            try:
                drive = self._build(record, lock)
            except Exception as exc:
                lock.release()
                self._broke(record.name, f"cannot start: {exc}")
                continue
            if self.timers is not None:
                self.timers.cancel(IDLE_FINISH_ID)
            verb = "starting" if record.status is RunStatus.QUEUED else "resuming"
            was = "" if record.status is RunStatus.QUEUED else f" ({record.status.value})"
            self.progress(f"{record.name}: {verb}{was}")
            self.worker = Worker(drive.lifecycle, lock)
            self.worker.thread.start()
            self.drive = drive
            drive.start()  # the lease: a timed job of the loop (each renewal in a thread)
            return
        if not candidates:
            self.end_machine_if_armed()

    def _end_lease(self) -> None:
        """The final state into the lease, in a thread (`settle_lease` waits for it)."""
        drive, self.drive = self.drive, None
        if drive is None:
            return
        drive.stop_lease()
        target = drive.close if drive.ticker is not None else drive.final_lease
        self._lease_final = threading.Thread(target=target, name="lease", daemon=True)
        self._lease_final.start()

    def settle_lease(self, timeout: float = 30.0) -> None:
        if self._lease_final is not None:
            self._lease_final.join(timeout)

    def _build(self, record: RunRecord, lock: RunLock) -> RunDrive:
        from runspec.machineowner import RUNSPEC  # noqa: PLC0415 - the run machinery
        from runspec.run.driver import build_run  # noqa: PLC0415 - as above

        paths = self.layout.run_paths(record.name)
        return build_run(
            load_accepted(paths.spec_file),
            paths,
            self.store,
            owner=RUNSPEC,  # the daemon runs on a machine runspec ends
            progress=self._run_progress(record.name),
            lock=lock,
            clock=self.clock,
            timers=self.timers,
            finish_dry_run=self.cfg.finish_dry_run,
            notify=self.cfg.notify,
        )

    def _run_progress(self, name: str) -> Callable[[str], None]:
        def progress(text: str) -> None:
            # The lifecycle's progress is what people read: stdout, so the journal too. Every
            # line of a block (a preflight report) says which run it is about.
            for line in tagged(name, text):
                self.progress(line)

        return progress

    def say_summary(self, record: RunRecord) -> None:
        """What a run came to, in the lines `runspec run` ends with too."""
        paths = self.layout.run_paths(record.name)
        try:
            spec = load_accepted(paths.spec_file)
        except RunspecError as exc:
            self.progress(f"{record.name}: {record.status.value}; its spec is unreadable: {exc}")
            return
        from runspec.views.report import summary_lines  # noqa: PLC0415 - the run machinery

        say = self._run_progress(record.name)
        for line in summary_lines(spec, paths, record, self.clock):
            say(line)  # one by one: each keeps its priority

    def _broke(self, name: str, why: str) -> None:
        retry = self.retry.setdefault(name, Retry())
        retry.attempts += 1
        pause = pause_after(retry.attempts, RETRY_FIRST_S, RETRY_MAX_S)
        retry.at = self.clock.monotonic() + pause
        if self.once and retry.attempts >= ONCE_ATTEMPTS:
            self.progress(error(f"{name}: {why}; left after {retry.attempts} tries"))
        else:
            self.progress(error(f"{name}: {why}; trying again in {human_duration(pause)}"))

    def reap(self) -> bool:
        """Collect a worker that ended; True when one did."""
        worker = self.worker
        if worker is None or worker.thread.is_alive():
            return False
        worker.thread.join()
        worker.lock.release()
        self.worker = None
        self._end_lease()
        record = worker.record
        runqueue.clear_cancel(self.layout.run_paths(record.name))
        if worker.error is not None:
            self._broke(record.name, f"the lifecycle failed: {worker.error}")
        elif record.status is RunStatus.FINISHED:
            self.retry.pop(record.name, None)
            self.ended.append(record)
            if not self.once:  # --once says every summary last, once nothing is left
                self.say_summary(record)
            self.arm_idle_finish()
        return True

    def waiting(self, record: RunRecord) -> bool:
        """A run this daemon still has to drive (not another process's, not given up)."""
        if record.status is RunStatus.FINISHED or record.name in self.elsewhere:
            return False
        retry = self.retry.get(record.name)
        return not (self.once and retry is not None and retry.attempts >= ONCE_ATTEMPTS)

    # -- requests -----------------------------------------------------------------------
    def handle_cancels(self) -> bool:
        """Cancel requests (a file in the run's job folder); True when one was seen."""
        seen = False
        for name in self.layout.names() if self.unfinished is None else self.unfinished:
            if not self.layout.cancel_file(name).exists():
                continue
            seen = True
            if self.worker is not None and self.worker.name == name:
                continue  # its lifecycle reads the same request
            self._cancel_queued(name)
        return seen

    def _cancel_queued(self, name: str) -> None:
        paths = self.layout.run_paths(name)
        lock = RunLock(paths)
        if lock.try_acquire() is not None:
            return  # its driver reads the same request
        try:
            record = self.store.load(name)
            if record is not None and record.status is RunStatus.QUEUED:
                self.store.transition(
                    record, RunStatus.FINISHED, "cancelled while queued", Termination.CANCELLED
                )
                self.progress(f"{name}: cancelled while queued")
                self.arm_idle_finish()
            if record is None or record.status is RunStatus.FINISHED:
                runqueue.clear_cancel(paths)
        except Exception as exc:  # a damaged record: the scan sets it aside
            log.warning("cannot cancel %s: %s", name, exc)
        finally:
            lock.release()

    # -- the machine's end -----------------------------------------------------------------
    def endgame(self, say: Callable[[str], None] | None = None) -> Endgame:
        from runspec.machine.endgame import Endgame  # noqa: PLC0415 - the run machinery

        return Endgame(
            self.layout,
            clock=self.clock,
            dry_run=self.cfg.finish_dry_run,
            say=say or (lambda line: self.progress(like(line, f"machine: {line}"))),
            notify=self.cfg.notify,
        )

    def end_machine_if_armed(self) -> None:
        """With nothing left to drive, apply an armed machine end (in a thread: a provider's
        API must never hold up the loop's watchdog pings)."""
        if self._endgame_thread is not None and self._endgame_thread.is_alive():
            return
        pending = load_pending(self.layout)
        if pending is None or pending.step == "applied":
            return
        self._endgame_thread = threading.Thread(
            target=self._enter_logged, name="endgame", daemon=True
        )
        self._endgame_thread.start()

    def _enter_logged(self) -> None:
        try:
            self.endgame().enter()
        except Exception:  # the daemon outlives a failed machine end; the log says why
            log.exception("the machine's end failed")

    @property
    def ending(self) -> bool:
        return self._endgame_thread is not None and self._endgame_thread.is_alive()

    def arm_idle_finish(self, since: float | None = None) -> None:
        """The idle finish, `idle_finish` after `since` (a run's end; default now)."""
        if self.cfg.idle_finish is None or self.timers is None or self.once:
            return
        if self.cfg.finish.action is FinishAction.NONE:
            return
        since = self.clock.time() if since is None else since
        at = since + self.cfg.idle_finish
        self.timers.at(IDLE_FINISH_ID, at, self.idle_finish)
        left = max(at - self.clock.time(), 0.0)
        self.progress(
            f"machine: idle finish armed: {self.cfg.finish.action.value} in {human_duration(left)}"
        )

    def rearm_idle_finish(self) -> None:
        """At start: the idle finish from the records, as it stood when the daemon stopped
        (the last run's end plus `idle_finish`), when every run has ended and none was
        driven since. The scheduler keeps nothing across a restart; the records do."""
        records = self.store.all()
        if not records or any(r.status is not RunStatus.FINISHED for r in records):
            return
        ends = [parse_utc_iso(r.ended_at) for r in records if r.ended_at]
        if ends and load_pending(self.layout) is None:
            self.arm_idle_finish(since=max(ends))

    def idle_finish(self) -> None:
        """The idle finish fell due: arm it for the whole machine and enter the endgame."""
        if self.worker is not None or self.inbox_pending() or runqueue.queued(self.store):
            return  # something arrived meanwhile; the next run's end re-arms it
        idle = human_duration(self.cfg.idle_finish or 0)
        self.progress(
            f"machine: idle for {idle}: applying the idle finish ({self.cfg.finish.action.value})"
        )
        from runspec.machine.endgame import MACHINE  # noqa: PLC0415 - the run machinery

        self.endgame().arm(
            MACHINE,
            self.cfg.finish,
            hourly_cost=self.cfg.hourly_cost,
            weights=str(self.layout.runs),
            why=f"idle for {idle}",
        )
        self.end_machine_if_armed()
