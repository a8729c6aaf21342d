"""The one clock seam: wall time for deadlines people read, monotonic time for waits.

Code that waits or plans takes a Clock, so tests drive time instead of sleeping. A process
started with RUNSPEC_CLOCK_OFFSET_S (seconds, may be negative) reads a wall clock that far off:
the seam through which tests give a real `runspec watch` a skewed clock.
"""

from __future__ import annotations

import os
import re
import threading
import time
from datetime import datetime, timedelta, timezone

OFFSET_VARIABLE = "RUNSPEC_CLOCK_OFFSET_S"


class Clock:
    """The real clock (its wall time `offset` seconds off: the tests' skewed machine)."""

    offset = 0.0  # a subclass that keeps its own __init__ reads the true time

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def time(self) -> float:
        return time.time() + self.offset

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.time(), tz=timezone.utc)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


def offset_from_env(value: str | None) -> float:
    if not value:
        return 0.0
    if not re.fullmatch(r"-?[0-9]{1,9}(\.[0-9]{1,6})?", value):
        shown = value[:40]
        raise SystemExit(
            f"runspec: {OFFSET_VARIABLE}={shown!r} is not a number of seconds "
            "(a test seam that skews the clock: unset it)"
        )
    return float(value)


SYSTEM = Clock(offset_from_env(os.environ.get(OFFSET_VARIABLE)))


class ManualClock(Clock):
    """A clock that only moves when told to; sleeping advances it at once."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._wall = start
        self._mono = 1000.0
        self._lock = threading.Lock()

    def time(self) -> float:
        with self._lock:
            return self._wall

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._wall += seconds
            self._mono += seconds

    def sleep(self, seconds: float) -> None:
        self.advance(max(seconds, 0.0))


def utc_iso(ts: float) -> str:
    """A UTC time as ISO 8601 with seconds, the form runspec persists."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="seconds")


def parse_utc_iso(text: str) -> float:
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def human_duration(seconds: float) -> str:
    """`3h41m`, `12m05s`, `42s`, `0.4s`: how runspec prints a span to people, everywhere."""
    if 0 <= seconds < 9.95:  # tenths matter only for short spans
        return f"{seconds:.1f}".removesuffix(".0") + "s"
    seconds = max(0, round(seconds))
    td = timedelta(seconds=seconds)
    hours, rem = divmod(int(td.total_seconds()), 3600)
    minutes, secs = divmod(rem, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
