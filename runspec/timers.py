"""Timed jobs: one APScheduler, its job store in memory, run by whoever drives it.

Every timed job of the daemon lives in its one `Timers` (the inbox rescan, the idle finish, each
run's `push.every`, the lease); the daemon's loop runs the due ones in its own thread at each step
(`run_due`). `runspec run` has no daemon: its run's driver (runspec.run.driver) keeps a `Timers`
of its own and a `Ticker` thread runs them, so both time pushes and leases with the same jobs,
and the pusher and the lease renewer never run timers themselves. Nothing here
outlives the process, and nothing needs to: what must survive a restart (the machine's pending end,
when each run ended, when each run last pushed) is in machine.json and the records, and the jobs
are re-armed from them at start. The time is read from the one clock seam (runspec.clock), so a
test moves the clock instead of sleeping. No job store can fail here (there is no file behind it),
so no scheduler thread can die and need restarting. Jobs may be armed and cancelled from any
thread; each runs in the thread that calls `run_due`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from apscheduler.executors.debug import DebugExecutor
from apscheduler.job import Job
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.base import BaseScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from runspec.clock import Clock

log = logging.getLogger("runspec.timers")

RESCAN_ID = "inbox-rescan"
IDLE_FINISH_ID = "idle-finish"
LEASE_ID = "lease"  # the driven run's lease renewal (runspec.watch.renew)


def push_every_id(run: str) -> str:
    """The job that asks `run`'s pusher for its scheduled push every `push.every`."""
    return f"push-every:{run}"


class _LoopScheduler(BaseScheduler):
    """An APScheduler with no thread of its own: the daemon's loop runs its due jobs."""

    def wakeup(self) -> None:
        """Nothing to wake: the loop asks for due jobs at every step, at most a tick apart."""

    def shutdown(self, wait: bool = True) -> None:
        super().shutdown(wait=False)  # no thread to wait for


class Timers:
    """The daemon's timed jobs, each under a fixed id (arming again replaces it)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        # Arming from a run's thread while the loop runs due jobs: one at a time.
        self._lock = threading.RLock()
        self._scheduler = _LoopScheduler(
            jobstores={"default": MemoryJobStore()},
            executors={"default": DebugExecutor()},
            timezone=timezone.utc,
        )
        self._scheduler.start()

    def every(
        self, job_id: str, seconds: float, job: Callable[[], None], first: float | None = None
    ) -> None:
        """Run `job` every `seconds`, the first time at `first` (UTC seconds; at the next step
        when that is past), by default `seconds` from now."""
        now = self.clock.now()
        start = now if first is None else datetime.fromtimestamp(first - seconds, tz=timezone.utc)
        trigger = IntervalTrigger(seconds=seconds, start_date=start, timezone=timezone.utc)
        self._add(job_id, job, trigger, start + timedelta(seconds=seconds))

    def at(self, job_id: str, ts: float, job: Callable[[], None]) -> None:
        """Run `job` once at `ts` (UTC seconds); at the next step when that is past."""
        when = datetime.fromtimestamp(ts, tz=timezone.utc)
        self._add(job_id, job, DateTrigger(run_date=when, timezone=timezone.utc), when)

    def _add(self, job_id: str, job: Callable[[], None], trigger: object, first: datetime) -> None:
        # next_run_time given: APScheduler would otherwise read its own clock, not ours.
        with self._lock:
            self._scheduler.add_job(
                job, trigger, id=job_id, replace_existing=True, next_run_time=first
            )

    def cancel(self, job_id: str) -> None:
        with self._lock, contextlib.suppress(JobLookupError):  # not armed: nothing to cancel
            self._scheduler.remove_job(job_id)

    def armed(self, job_id: str) -> bool:
        return self._scheduler.get_job(job_id) is not None

    def due_at(self, job_id: str) -> float | None:
        job: Job | None = self._scheduler.get_job(job_id)
        return None if job is None or job.next_run_time is None else job.next_run_time.timestamp()

    def next_in(self) -> float | None:
        """Seconds until the next job is due (0 when one is), None when none is armed."""
        times = [j.next_run_time for j in self._scheduler.get_jobs() if j.next_run_time]
        if not times:
            return None
        return max(min(times).timestamp() - self.clock.time(), 0.0)

    def run_due(self) -> int:
        """Run every job that is due, here and now, each once however many of its times
        passed (a suspended machine, a blocked step); how many ran."""
        now = self.clock.now()
        ran = 0
        for listed in self._scheduler.get_jobs():
            func = self._advance(listed.id, now)
            if func is None:
                continue
            ran += 1
            try:
                func()
            except Exception:  # one job's fault must not end the daemon or the other jobs
                log.exception("the timed job %s failed", listed.id)
        return ran

    def _advance(self, job_id: str, now: datetime) -> Callable[[], object] | None:
        """A due job moved on to its next time (or removed), and what it runs; None when it
        is not due. Moved on before it runs: a job may arm or cancel jobs, itself included."""
        with self._lock:
            # Read again: a job run before it in this step may have moved or cancelled it.
            job: Job | None = self._scheduler.get_job(job_id)
            if job is None or job.next_run_time is None or job.next_run_time > now:
                return None
            following = job.trigger.get_next_fire_time(job.next_run_time, now)
            while following is not None and following <= now:
                following = job.trigger.get_next_fire_time(following, now)
            if following is None:
                self.cancel(job.id)
            else:
                job.modify(next_run_time=following)
            func: Callable[[], object] = job.func
            return func

    def close(self) -> None:
        self._scheduler.shutdown()


class Ticker:
    """Runs a `Timers`' due jobs in a thread of its own, every `slice` real seconds, where no
    daemon's loop does it (`runspec run`: runspec.run.driver). The jobs themselves read the
    clock seam, so a test that moves the clock sees them run within a slice."""

    def __init__(self, timers: Timers, slice_s: float = 0.5, name: str = "timers") -> None:
        self.timers = timers
        self.slice = slice_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Ticker:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.slice):
            self.timers.run_due()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
