"""One run's lifecycle in a thread, and how the daemon tells a system shutdown from a restart."""

from __future__ import annotations

import logging
import subprocess
import threading
from typing import TYPE_CHECKING

from runspec.store.owner import RunLock

if TYPE_CHECKING:  # the lifecycle loads with the first run (daemon/runs.py)
    from runspec.requests import RunRequests
    from runspec.run.lifecycle import Lifecycle
    from runspec.store.state import RunRecord

log = logging.getLogger("runspec.daemon")


def system_stopping(timeout: float = 5.0) -> bool:
    """True when systemd says the whole system is going down (a preemption, a poweroff)."""
    try:
        out = subprocess.run(
            ["systemctl", "is-system-running"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.stdout.strip() == "stopping"


class Worker:
    """One run's lifecycle in a thread; the daemon holds the run's lock for it."""

    def __init__(self, lifecycle: Lifecycle, lock: RunLock) -> None:
        self.lifecycle = lifecycle
        self.lock = lock
        self.name: str = lifecycle.spec.name
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"run-{self.name}", daemon=True)

    def _run(self) -> None:
        try:
            self.lifecycle.run()
        except BaseException as exc:  # the daemon outlives any one run's bug
            log.exception("run %s: the lifecycle failed", self.name)
            self.error = exc

    @property
    def requests(self) -> RunRequests:
        return self.lifecycle.requests

    @property
    def record(self) -> RunRecord:
        return self.lifecycle.record
