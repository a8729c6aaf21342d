"""How long the machine's end keeps asking the provider: until the run's deadline plus its
overrun, the time its budget pays for (issue 19), not a fixed span.

An end reached at or past that point (a budget stop whose final push took the overrun, the
failsafe firing after it) still gets `FinishHost.least_window` of tries: giving up at once
would leave the machine billing with nobody asking. An end with no run deadline to go by (the
idle finish, a run whose record cannot be read) keeps trying for `FinishHost.end_window`.
"""

from __future__ import annotations

from runspec.budget import overrun_end
from runspec.errors import RunspecError
from runspec.machine.host import FinishHost
from runspec.spec.loader import load_accepted
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore


def budget_end(layout: StateLayout, run: str) -> float | None:
    """`run`'s deadline plus its spec's overrun (UTC), or None when it cannot be read."""
    try:
        record = RecordStore(layout.state).load(run)
        if record is None or record.deadline is None:
            return None
        spec = load_accepted(layout.run_paths(run).spec_file)
    except (RunspecError, OSError, ValueError):
        return None
    return overrun_end(record, spec)


def end_until(layout: StateLayout, run: str, host: FinishHost, now: float) -> float:
    """The wall-clock time the end of the machine, armed for `run`, stops retrying."""
    end = budget_end(layout, run)
    if end is None:
        return now + host.end_window
    return max(end, now + host.least_window)
