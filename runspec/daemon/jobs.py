"""The daemon's scheduled jobs, registered in one place, kept in `<state>/scheduler.sqlite`.

Job functions are module-level (stored as textual references, so the SQLite store can hold
them); each only raises a flag that the daemon's main loop acts on, so a job never touches
state another thread is changing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

log = logging.getLogger("runspec.daemon.jobs")

RESCAN_DUE = threading.Event()
IDLE_FINISH_DUE = threading.Event()

RESCAN_ID = "inbox-rescan"
IDLE_FINISH_ID = "idle-finish"


def rescan() -> None:
    RESCAN_DUE.set()


def idle_finish() -> None:
    IDLE_FINISH_DUE.set()


def make_scheduler(db: Path) -> Any:
    from apscheduler.jobstores.memory import MemoryJobStore
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    # Only what must survive a restart (the idle finish's time) goes to SQLite: the rescan
    # rewrites its store every 30 s, and on a full disk that write killed the scheduler.
    return BackgroundScheduler(
        jobstores={
            "default": SQLAlchemyJobStore(url=f"sqlite:///{db}"),
            "memory": MemoryJobStore(),
        },
        timezone="UTC",
        daemon=True,
    )


def alive(scheduler: Any) -> bool:
    """The scheduler's thread still runs (a job store that raised can end it)."""
    thread = getattr(scheduler, "_thread", None)
    return thread is None or thread.is_alive()


def register(scheduler: Any, rescan_every: float) -> None:
    """Every recurring job, with a fixed id so a restart replaces rather than duplicates it."""
    scheduler.add_job(
        "runspec.daemon.jobs:rescan",
        "interval",
        seconds=rescan_every,
        id=RESCAN_ID,
        jobstore="memory",
        replace_existing=True,
        max_instances=1,
        coalesce=True,
        misfire_grace_time=None,
    )


def arm_idle_finish(scheduler: Any, at: float) -> None:
    # misfire_grace_time=None: a deadline that passed while the daemon was down still fires.
    scheduler.add_job(
        "runspec.daemon.jobs:idle_finish",
        "date",
        run_date=datetime.fromtimestamp(at, tz=timezone.utc),
        id=IDLE_FINISH_ID,
        replace_existing=True,
        max_instances=1,
        misfire_grace_time=None,
    )


def disarm_idle_finish(scheduler: Any) -> None:
    from apscheduler.jobstores.base import JobLookupError

    with contextlib.suppress(JobLookupError):
        scheduler.remove_job(IDLE_FINISH_ID)
    IDLE_FINISH_DUE.clear()


def idle_finish_armed(scheduler: Any) -> bool:
    return scheduler.get_job(IDLE_FINISH_ID) is not None
