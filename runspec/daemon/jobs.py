"""The daemon's timed jobs: one APScheduler, its job store in memory, run by the daemon's loop.

Every timed job of the daemon lives here (the inbox rescan, the idle finish, the lease). Nothing
here outlives the process, and nothing needs to: what must survive a restart (the machine's
pending end, when each run ended) is in machine.json and the records, and the daemon re-arms
its jobs from them at start. APScheduler keeps the jobs and their triggers; the loop runs the
due ones in its own thread at each step (`run_due`), with the time read from the one clock
seam (runspec.clock), so a job may act on the daemon's state directly and a test moves the
clock instead of sleeping. No job store can fail here (there is no file behind it), so no
scheduler thread can die and need restarting.
"""

from __future__ import annotations

import contextlib
import logging
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

log = logging.getLogger("runspec.daemon.jobs")

RESCAN_ID = "inbox-rescan"
IDLE_FINISH_ID = "idle-finish"
LEASE_ID = "lease"  # the driven run's lease renewal (runspec.watch.renew)


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
        self._scheduler = _LoopScheduler(
            jobstores={"default": MemoryJobStore()},
            executors={"default": DebugExecutor()},
            timezone=timezone.utc,
        )
        self._scheduler.start()

    def every(self, job_id: str, seconds: float, job: Callable[[], None]) -> None:
        """Run `job` every `seconds`, the first time `seconds` from now."""
        now = self.clock.now()
        trigger = IntervalTrigger(seconds=seconds, start_date=now, timezone=timezone.utc)
        self._add(job_id, job, trigger, now + timedelta(seconds=seconds))

    def at(self, job_id: str, ts: float, job: Callable[[], None]) -> None:
        """Run `job` once at `ts` (UTC seconds); at the next step when that is past."""
        when = datetime.fromtimestamp(ts, tz=timezone.utc)
        self._add(job_id, job, DateTrigger(run_date=when, timezone=timezone.utc), when)

    def _add(self, job_id: str, job: Callable[[], None], trigger: object, first: datetime) -> None:
        # next_run_time given: APScheduler would otherwise read its own clock, not ours.
        self._scheduler.add_job(job, trigger, id=job_id, replace_existing=True, next_run_time=first)

    def cancel(self, job_id: str) -> None:
        with contextlib.suppress(JobLookupError):  # not armed: nothing to cancel
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
            # Read again: a job run before it in this step may have moved or cancelled it.
            job: Job | None = self._scheduler.get_job(listed.id)
            if job is None or job.next_run_time is None or job.next_run_time > now:
                continue
            following = job.trigger.get_next_fire_time(job.next_run_time, now)
            while following is not None and following <= now:
                following = job.trigger.get_next_fire_time(following, now)
            # Moved on before it runs: a job may arm or cancel jobs, itself included.
            if following is None:
                self.cancel(job.id)
            else:
                job.modify(next_run_time=following)
            ran += 1
            try:
                job.func()
            except Exception:  # one job's fault must not end the daemon or the other jobs
                log.exception("the timed job %s failed", job.id)
        return ran

    def close(self) -> None:
        self._scheduler.shutdown()
