"""`runspec daemon --stop`: end the daemon of a state folder the way systemd does (SIGTERM: it
pushes what it drives, then exits) and wait until it has let the state folder go."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from runspec.commands import print_json
from runspec.errors import Outcome

STOP_WAIT_S = 300.0  # its shutdown push has this long, as under systemd's TimeoutStopSec


def stop(state: Path, as_json: bool) -> Outcome:
    from runspec.clock import SYSTEM
    from runspec.errors import RunspecError
    from runspec.store.owner import daemon_holder
    from runspec.store.paths import StateLayout

    layout = StateLayout(state)
    holder = daemon_holder(layout)
    if holder is None:
        if as_json:
            print_json({"stopped": None})
        else:
            print(f"no runspecd runs on {state}")
        return Outcome.OK
    # The lock's holder is the daemon itself (its pid from the lock it holds, not a file).
    os.kill(holder.pid, signal.SIGTERM)
    end = SYSTEM.monotonic() + STOP_WAIT_S
    while daemon_holder(layout) is not None:
        if SYSTEM.monotonic() > end:
            raise RunspecError(f"runspecd (pid {holder.pid}) is still stopping; see its log")
        SYSTEM.sleep(0.2)
    layout.daemon_pid.unlink(missing_ok=True)
    if as_json:
        print_json({"stopped": holder.pid})
    else:
        print(f"runspecd (pid {holder.pid}) stopped")
    return Outcome.OK
