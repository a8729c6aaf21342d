"""Who a process is: pid, start time and boot id, so a recycled pid is never signalled.

A pid alone names whatever process holds that number now. After the trainer exits (or the
machine reboots) the same pid can belong to someone else's process; the start time (clock ticks
since boot, from /proc/<pid>/stat) and the boot id together make the identity unique.
"""

from __future__ import annotations

import os
import signal
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str:
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return ""


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (which may hold spaces)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    close = raw.rfind(")")
    return raw[close + 2 :].split() if close >= 0 else None


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot; None if there is no such process."""
    fields = _stat_fields(pid)
    # After the name: state is field 3 of the full line, starttime is field 22.
    return int(fields[22 - 3]) if fields and len(fields) > 19 else None


def _state(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[0] if fields else None


@dataclass(frozen=True)
class ProcessIdentity:
    pid: int
    start_ticks: int
    boot_id: str

    @classmethod
    def of(cls, pid: int) -> ProcessIdentity | None:
        ticks = start_ticks(pid)
        if ticks is None:
            return None
        return cls(pid=pid, start_ticks=ticks, boot_id=boot_id())

    def matches(self) -> bool:
        """True when `pid` still names this very process (same boot, same start time)."""
        if self.boot_id != boot_id():
            return False
        return start_ticks(self.pid) == self.start_ticks

    def alive(self) -> bool:
        """This process exists and has not exited (a zombie waiting to be reaped has)."""
        return self.matches() and _state(self.pid) not in (None, "Z", "X")

    def signal_group(self, sig: signal.Signals) -> bool:
        """Signal this process's group (it leads one: started in its own session), after checking
        the identity. False, and nothing sent, when the pid is no longer this process."""
        if not self.matches():
            return False
        try:
            pgid = os.getpgid(self.pid)
            if pgid == self.pid:
                os.killpg(pgid, sig)
            else:
                # Not a group leader: signal only the process itself, never a group it merely
                # belongs to (that could be its supervisor's).
                os.kill(self.pid, sig)
        except ProcessLookupError:
            return False
        return True

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessIdentity:
        return cls(
            pid=int(data["pid"]), start_ticks=int(data["start_ticks"]), boot_id=str(data["boot_id"])
        )
