"""Progress of one long transfer (a download, an extraction, a push), with its rate and ETA.

On a terminal it is a live bar (runspec.voice.Transient, redrawn in place); anywhere else
(the journal, a file) a line at each tenth done or every 30 s, whichever comes first, and
nothing at all for a transfer over within its first few seconds: the line that says it is done
says enough then. Its ETA (and a line, which always has one) waits until the bytes have flowed
a few seconds. Its state can also be kept in a small JSON file, which `runspec status`
reads while the transfer runs (runspec.store.paths: `transfer.json` in the job folder).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runspec.clock import SYSTEM, Clock, human_duration, utc_iso
from runspec.store.atomic import write_text
from runspec.units import format_bytes
from runspec.voice import Transient, live

LINE_EVERY_S = 30.0  # the longest gap between two lines
QUIET_S = 5.0  # no line for a transfer this young (and at most one line this often)
BAR_EVERY_S = 0.2  # how often a live bar is redrawn
ETA_AFTER_S = 3.0  # no ETA before the bytes have flowed this long (a line comes after QUIET_S)
SNAPSHOT_EVERY_S = 1.0  # how often the state file is rewritten
BAR_WIDTH = 20


def rate_text(done: float, seconds: float) -> str:
    return f"{format_bytes(done / seconds)}/s" if seconds > 0 and done > 0 else "-"


class Meter:
    """Counts bytes done of `total` (None when unknown) and says how it goes."""

    def __init__(
        self,
        what: str,
        total: int | None,
        say: Callable[[str], None],
        *,
        clock: Clock = SYSTEM,
        bar: bool | None = None,
        snapshot: Path | None = None,
    ) -> None:
        self.what = what
        self.total = total if total and total > 0 else None
        self.say = say
        self.clock = clock
        self.bar = live() if bar is None else bar
        self.snapshot = snapshot
        self.done = 0
        self.started = clock.monotonic()
        self.started_at = clock.time()
        self._next_tenth = 1
        self._last_line = self.started
        self._last_bar = 0.0
        self._last_snapshot = 0.0
        self._flowing_since: float | None = None  # the first byte counted
        self._lock = threading.Lock()
        self._write_snapshot()

    # --- counting -----------------------------------------------------------------------
    def add(self, n: int) -> None:
        self.set(self.done + max(0, n))

    def set(self, done: int) -> None:
        with self._lock:
            self.done = max(self.done, min(done, self.total) if self.total else done)
            if self.done > 0 and self._flowing_since is None:
                self._flowing_since = self.clock.monotonic()
            self._report()

    def close(self) -> None:
        """The transfer is over (done or not): the bar is cleared, the state file removed."""
        if self.bar:
            self.say(Transient(""))
        if self.snapshot is not None:
            self.snapshot.unlink(missing_ok=True)

    # --- telling ------------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        return max(self.clock.monotonic() - self.started, 0.0)

    def text(self) -> str:
        """`downloading x.tar: 45.0 MB of 100.0 MB (45%), 12.0 MB/s, ETA 4.6s`."""
        elapsed = self.elapsed
        rate = rate_text(self.done, elapsed)
        if self.total is None:
            return f"{self.what}: {format_bytes(self.done)}, {rate}"
        percent = 100 * self.done / self.total
        eta = ""
        if self._steady() and elapsed > 0 and self.done < self.total:
            left = (self.total - self.done) / (self.done / elapsed)
            eta = f", ETA {human_duration(left)}"
        return (
            f"{self.what}: {format_bytes(self.done)} of {format_bytes(self.total)} "
            f"({percent:.0f}%), {rate}{eta}"
        )

    def _steady(self) -> bool:
        """Whether the bytes have flowed long enough for an ETA: a push's first requests and
        its first half second would put it hours away."""
        since = self._flowing_since
        return since is not None and self.clock.monotonic() - since >= ETA_AFTER_S

    def _report(self) -> None:
        now = self.clock.monotonic()
        if now - self._last_snapshot >= SNAPSHOT_EVERY_S:
            self._write_snapshot()
        if self.bar:
            if now - self._last_bar >= BAR_EVERY_S:
                self._last_bar = now
                self.say(Transient(self._bar_text()))
            return
        if now - self.started < QUIET_S or now - self._last_line < QUIET_S:
            return
        if self.total is not None and not self._steady():
            return  # a line without its ETA would come again a tenth later with it
        tenth = 10 * self.done // self.total if self.total else 0
        if tenth >= self._next_tenth or now - self._last_line >= LINE_EVERY_S:
            self._next_tenth = tenth + 1
            self._last_line = now
            self.say(self.text())

    def _bar_text(self) -> str:
        if self.total is None:
            return self.text()
        filled = BAR_WIDTH * self.done // self.total
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        what, _, figures = self.text().partition(": ")
        return f"{what} [{bar}] {figures}"

    def _write_snapshot(self) -> None:
        if self.snapshot is None:
            return
        self._last_snapshot = self.clock.monotonic()
        state = {
            "what": self.what,
            "done": self.done,
            "total": self.total,
            "started": utc_iso(self.started_at),
            "seconds": round(self.elapsed, 1),
        }
        # Only `runspec status` reads it: a full disk must not stop the transfer.
        with contextlib.suppress(OSError):
            write_text(self.snapshot, json.dumps(state) + "\n")


def read_snapshot(path: Path) -> dict[str, Any] | None:
    """A transfer's state as its meter last wrote it; None when none is running."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("done"), int) else None


def snapshot_text(data: dict[str, Any]) -> str:
    """`pushing epoch 7: 45.0 MB of 105.2 MB (43%), 12.0 MB/s` from a snapshot."""
    done, total = int(data["done"]), data.get("total")
    seconds = float(data.get("seconds") or 0.0)
    what = str(data.get("what") or "transfer")
    if not isinstance(total, int) or total <= 0:
        return f"{what}: {format_bytes(done)}, {rate_text(done, seconds)}"
    return (
        f"{what}: {format_bytes(done)} of {format_bytes(total)} ({100 * done / total:.0f}%), "
        f"{rate_text(done, seconds)}"
    )
