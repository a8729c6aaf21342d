"""The scheduled push as an APScheduler job that a persistent job store can keep.

A SQLite job store pickles the job: so the function is a module-level textual reference and
its one argument a string. It finds the live Pusher for that key here; after a daemon restart
there is none until the lifecycle re-attaches and registers a new one (which replaces the
job), so a late run in between does nothing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any, Protocol

from apscheduler.jobstores.base import JobLookupError

log = logging.getLogger("runspec.push")

JOB_FUNC = "runspec.push.jobs:scheduled_push"


class _Requestable(Protocol):
    def request_scheduled(self) -> None: ...


_live: dict[str, _Requestable] = {}
_lock = threading.Lock()


def register(key: str, pusher: _Requestable) -> None:
    with _lock:
        _live[key] = pusher


def unregister(key: str, pusher: _Requestable) -> None:
    with _lock:
        if _live.get(key) is pusher:
            del _live[key]


def scheduled_push(key: str) -> None:
    """The interval job: ask the run's pusher for a push; never raises (a job's error must
    not reach the scheduler)."""
    with _lock:
        pusher = _live.get(key)
    if pusher is None:
        log.info("scheduled push for %s: no live pusher (run not attached); skipped", key)
        return
    try:
        pusher.request_scheduled()
    except Exception:
        log.exception("scheduled push for %s could not be requested", key)


def add_interval_job(scheduler: Any, job_id: str, key: str, every: float) -> None:
    scheduler.add_job(
        JOB_FUNC,
        "interval",
        seconds=every,
        args=[key],
        id=job_id,
        replace_existing=True,
        max_instances=1,
        coalesce=True,
        misfire_grace_time=None,  # a push missed while the daemon was down is still wanted
    )


def remove_job(scheduler: Any, job_id: str) -> None:
    with contextlib.suppress(JobLookupError):
        scheduler.remove_job(job_id)
