"""`runspec cancel NAME`: stop at the next epoch boundary, push, apply no finish.

The answer is what will happen. While the run's end is undecided (queued, training, stopping,
or its final push still retrying) the request is left for its driver and no finish follows.
Once the end is decided (the run moved to `finishing`, or finished with its finish deferred to
the machine's end) the command refuses with exit 2 and says what will happen instead. The look
and the request are taken under the run's cancel lock, the one its driver decides the end
under (runspec.store.cancelgate), so the two never cross.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from runspec.commands import add_format, add_name, add_state, print_json, state_dir
from runspec.errors import Outcome

if TYPE_CHECKING:
    from runspec.store.paths import StateLayout
    from runspec.store.state import RunRecord


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_name(parser)
    add_state(parser)
    add_format(parser)


def run(args: argparse.Namespace) -> Outcome:
    from runspec.clock import SYSTEM
    from runspec.daemon.queue import request_cancel
    from runspec.errors import UsageError
    from runspec.store.cancelgate import cancel_gate
    from runspec.store.owner import daemon_holder, run_holder
    from runspec.store.paths import StateLayout
    from runspec.store.state import RecordStore, RunStatus

    state = state_dir(args)
    layout = StateLayout(state)
    store = RecordStore(state)
    if store.load(args.name) is None:
        raise UsageError(f"no run named {args.name!r} in {state}")
    paths = layout.run_paths(args.name)
    with cancel_gate(paths):
        record = store.load(args.name)  # read again under the lock its driver decides under
        if record is None:
            raise UsageError(f"no run named {args.name!r} in {state}")
        decided = _decided(layout, record)
        if decided is not None:
            raise UsageError(decided)
        request_cancel(paths, SYSTEM)
    # Whoever drives the run reads the request: the daemon, or a `runspec run`.
    owner = run_holder(paths) or daemon_holder(layout)
    where = str(owner) if owner else "whoever drives it next (no daemon runs now)"
    if record.status is RunStatus.QUEUED:
        line = f"cancel requested: {where} removes {args.name} from the queue"
    elif record.status is RunStatus.PUSHING:
        line = (
            f"cancel requested: {where} finishes {args.name}'s final push and applies no "
            "finish; the machine is kept"
        )
    else:
        line = (
            f"cancel requested: {where} stops {args.name} at the next epoch boundary "
            "and pushes; no finish follows, the machine is kept"
        )
    other = _other_end(layout, args.name)
    if other and record.status is not RunStatus.QUEUED:
        line += f" (but {other})"
    if args.format == "json":
        print_json(
            {
                "cancel_requested": True,
                "name": args.name,
                "by": str(owner) if owner else None,
                "machine_end_armed": other or None,
            }
        )
    else:
        print(line)
    return Outcome.OK


def _decided(layout: StateLayout, record: RunRecord) -> str | None:
    """Why a cancel can change nothing now, and what will happen instead; None when it can."""
    from runspec.machine.machinefile import load_pending
    from runspec.store.hint import command
    from runspec.store.state import RunStatus

    name = record.name
    if record.status is RunStatus.FINISHING:
        begun = record.finish.summary if record.finish else ""
        return (
            f"run {name!r} is past its final push and its finish is decided: it is being "
            f"applied{f' ({begun})' if begun else ''}; a cancel cannot keep the machine now. "
            f"`{command(f'status {name}', layout.state)}` says how it ends"
        )
    if record.status is not RunStatus.FINISHED:
        return None
    pending = load_pending(layout)
    if pending is not None and pending.run == name and pending.step != "applied":
        return (
            f"run {name!r} has finished and its finish ({pending.finish.action.value}) is armed "
            "for the machine: it is applied once no other run is driven or queued; a cancel "
            "cannot keep the machine now"
        )
    return f"run {name!r} has already finished ({record.reason})"


def _other_end(layout: StateLayout, name: str) -> str:
    """A machine end another run armed: it still applies once nothing is driven."""
    from runspec.machine.machinefile import load_pending

    pending = load_pending(layout)
    if pending is None or pending.run == name or pending.step == "applied":
        return ""
    return (
        f"the machine's end armed for {pending.run} ({pending.finish.action.value}) still "
        "applies once no run is driven or queued"
    )
