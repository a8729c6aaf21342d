"""What other threads ask of a running lifecycle: the one typed seam between a run and whoever
drives it (the daemon's loop, `runspec run`'s signal handlers).

Each request only sets a flag or queues an object, never acts: the lifecycle and its supervisor
read them at their own pace. "Push now" carries its own answer: whoever asks waits on `done`,
and a phase with nothing to push answers at once instead of leaving the asker to time out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from runspec.store.paths import RunPaths
from runspec.store.state import PushRecord


@dataclass
class PushNow:
    """A push asked for now, and its answer: from the daemon (a system shutdown) to the run,
    and from the run to its pusher."""

    final: bool = False  # the run's last push: carries its record and log, always commits
    done: threading.Event = field(default_factory=threading.Event)
    result: PushRecord | None = None
    note: str = ""  # why there was nothing to push, for the asker's log

    def answer(self, result: PushRecord | None, note: str = "") -> None:
        self.result = result
        self.note = note
        self.done.set()


class RunRequests:
    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.interrupted = threading.Event()  # SIGINT/SIGTERM to `runspec run`: push, no finish
        self.aborted = threading.Event()  # a second signal: exit now
        self.detached = threading.Event()  # the daemon exits; the trainer keeps running
        # Under an engine: after its stop signal, the trainer is ended this soon (seconds), its
        # newest checkpoint pushed, instead of waiting for the epoch boundary.
        self.interrupt_grace: float | None = None
        self._lock = threading.Lock()
        self._push_now: list[PushNow] = []
        self._serving = False  # the training phase answers push-now; others answer at once

    def cancel(self) -> None:
        self.cancelled.set()

    def poll_cancel(
        self,
        paths: RunPaths,
        say: Callable[[str], None],
        line: str = "cancel requested; stopping at the next epoch boundary",
    ) -> bool:
        """`runspec cancel` leaves a file for whoever drives the run (the daemon or a
        `runspec run`): take it as a request, said as `line`. True when a cancel is pending."""
        if not self.cancelled.is_set() and paths.cancel_file.exists():
            say(line)
            self.cancelled.set()
        return self.cancelled.is_set()

    def interrupt(self) -> None:
        if self.interrupted.is_set():
            self.aborted.set()
        self.interrupted.set()

    def detach(self) -> None:
        self.detached.set()

    def push_now(self) -> PushNow:
        """Ask for the newest complete checkpoint to be pushed now (a system shutdown)."""
        request = PushNow()
        with self._lock:
            if self._serving:
                self._push_now.append(request)
                return request
        request.answer(None, "the run is not training: nothing new to push")
        return request

    def serve_push_now(self, serving: bool) -> None:
        """The training phase says it will answer push-now requests (or no longer will)."""
        with self._lock:
            self._serving = serving
            left: list[PushNow] = []
            if not serving:
                left, self._push_now = self._push_now, []
        for request in left:
            request.answer(None, "training ended before the push")

    def take_push_now(self) -> list[PushNow]:
        with self._lock:
            taken, self._push_now = self._push_now, []
        return taken
