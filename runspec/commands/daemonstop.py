"""`runspec daemon --stop`: end the daemon of a state folder the way systemd does (SIGTERM: it
pushes the newest checkpoint of the run it drives, verified at the target, saves its state and
exits), wait until it has let the state folder go, and say what was pushed and what is left: a
run's trainer keeps running, detached, with nobody to push it or end the machine until a daemon
drives it again; queued runs and a machine end armed wait for the next daemon; a failsafe left
armed still fires."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from runspec.commands import print_json
from runspec.errors import Outcome

if TYPE_CHECKING:
    from runspec.store.paths import StateLayout

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
    before = _verified(layout)
    # The lock's holder is the daemon itself (its pid from the lock it holds, not a file).
    os.kill(holder.pid, signal.SIGTERM)
    end = SYSTEM.monotonic() + STOP_WAIT_S
    while daemon_holder(layout) is not None:
        if SYSTEM.monotonic() > end:
            raise RunspecError(f"runspecd (pid {holder.pid}) is still stopping; see its log")
        SYSTEM.sleep(0.2)
    layout.daemon_pid.unlink(missing_ok=True)
    left = pushed_at_stop(layout, before) + left_behind(layout)
    if as_json:
        print_json({"stopped": holder.pid, "left": left})
    else:
        print(f"runspecd (pid {holder.pid}) stopped")
        for line in left:
            print(line)
    return Outcome.OK


def _verified(layout: StateLayout) -> dict[str, str | None]:
    """Each unfinished run's last verified push (its time), to tell the stop's own push."""
    from runspec.store.state import RecordStore, RunStatus

    records = RecordStore(layout.state).scan().records
    return {
        r.name: r.last_push.time if r.last_push else None
        for r in records
        if r.status not in (RunStatus.QUEUED, RunStatus.FINISHED)
    }


def pushed_at_stop(layout: StateLayout, before: dict[str, str | None]) -> list[str]:
    """What the daemon's stop pushed, one line per run it was driving, read from the records
    (only a push verified at the target is recorded)."""
    from runspec.errors import RunspecError
    from runspec.push.targets import kind_of
    from runspec.spec.loader import load_accepted
    from runspec.store.state import RecordStore

    store = RecordStore(layout.state)
    lines: list[str] = []
    for name, was in sorted(before.items()):
        record = store.load(name)
        push = record.last_push if record is not None else None
        if push is None or push.time == was:
            continue  # nothing new: the daemon's log says why (not training, a failed push)
        paths = layout.run_paths(name)
        try:
            spec = load_accepted(paths.spec_file)
            where = f" at {kind_of(spec.push).where(spec, paths)}" if spec.push else ""
        except RunspecError:
            where = ""
        epoch = f"epoch {push.epoch}" if push.epoch is not None else "its files"
        lines.append(f"{name}: pushed and verified{where}: {epoch} ({push.time})")
    return lines


def left_behind(layout: StateLayout) -> list[str]:
    """What goes on, or waits, with no daemon: one line each, read from the state folder."""
    from runspec.machine.leftarmed import left_armed
    from runspec.machine.machinefile import load_pending
    from runspec.store.hint import command
    from runspec.store.state import RecordStore, RunStatus
    from runspec.trainer.launcher import TrainerHandle

    again = f"`{command('daemon', layout.state)}` (or `systemctl start runspecd`)"
    lines: list[str] = []
    queued = 0
    for record in RecordStore(layout.state).scan().records:
        if record.status is RunStatus.QUEUED:
            queued += 1
            continue
        if record.status is RunStatus.FINISHED:
            continue
        paths = layout.run_paths(record.name)
        handle = TrainerHandle.find(paths)
        if handle is not None and handle.alive():
            lines.append(
                f"{record.name}: its trainer keeps running, detached; nothing pushes it, "
                f"stops it by the budget or ends the machine until {again} drives it again"
            )
        else:
            lines.append(f"{record.name}: left {record.status.value}; {again} goes on with it")
        if (armed := left_armed(paths)) is not None:
            lines.append(f"{record.name}: {armed}")
    if queued:
        lines.append(f"{queued} queued run(s) wait for the next daemon: {again}")
    pending = load_pending(layout)
    if pending is not None and pending.step != "applied":
        lines.append(
            f"the machine's end armed for {pending.run} ({pending.finish.action.value}) waits "
            f"for the next daemon: {again}"
        )
    return lines
