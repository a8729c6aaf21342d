"""A push's bytes as they go out, for its progress line and `runspec status`.

Counted from this process's written bytes (psutil's `write_chars`, /proc/self/io's wchar, which
counts writes to sockets too) since the push began, whatever the target does inside:
huggingface_hub's LFS or xet uploads, or a copy onto a volume. An estimate, capped at the
push's size; the push's own verified line says what arrived.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence

import psutil

from runspec.meter import Meter
from runspec.push.base import PushTarget, StagedFile

POLL_S = 0.5


def _written(proc: psutil.Process) -> int | None:
    try:
        return int(proc.io_counters().write_chars)
    except (psutil.Error, AttributeError, NotImplementedError, OSError):
        return None  # no /proc/self/io here: the push goes on without a figure


def _no_client_bars() -> None:
    """huggingface_hub draws its own upload bars on stderr, outside the one stream people
    read (and into the journal, a line per redraw): the meter says the same, once."""
    hub = sys.modules.get("huggingface_hub")
    if hub is not None:
        hub.utils.disable_progress_bars()


def send(
    target: PushTarget, uploads: Sequence[StagedFile], message: str, meter: Meter
) -> str | None:
    """`target.push(uploads, message)`, its progress counted into `meter` meanwhile."""
    _no_client_bars()
    proc = psutil.Process()
    base = _written(proc)
    stop = threading.Event()

    def watch() -> None:
        while base is not None and not stop.wait(POLL_S):
            now = _written(proc)
            if now is None:
                return
            meter.set(now - base)

    watcher = threading.Thread(target=watch, name="push-meter", daemon=True)
    watcher.start()
    try:
        return target.push(uploads, message)
    finally:
        stop.set()
        watcher.join(timeout=POLL_S * 4)
        meter.close()
