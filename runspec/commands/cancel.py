"""`runspec cancel NAME`: stop at the next epoch boundary, push, keep the machine."""

from __future__ import annotations

import argparse

from runspec.commands import add_format, add_name, add_state, print_json, state_dir
from runspec.errors import Outcome


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_name(parser)
    add_state(parser)
    add_format(parser)


def run(args: argparse.Namespace) -> Outcome:
    from runspec.clock import SYSTEM
    from runspec.daemon.queue import request_cancel
    from runspec.errors import UsageError
    from runspec.store.owner import daemon_holder, run_holder
    from runspec.store.paths import StateLayout
    from runspec.store.state import RecordStore, RunStatus

    state = state_dir(args)
    layout = StateLayout(state)
    record = RecordStore(state).load(args.name)
    if record is None:
        raise UsageError(f"no run named {args.name!r} in {state}")
    if record.status is RunStatus.FINISHED:
        raise UsageError(f"run {args.name!r} has already finished ({record.reason})")
    paths = layout.run_paths(args.name)
    request_cancel(paths, SYSTEM)
    # Whoever drives the run reads the request: the daemon, or a `runspec run`.
    owner = run_holder(paths) or daemon_holder(layout)
    where = str(owner) if owner else "whoever drives it next (no daemon runs now)"
    if record.status is RunStatus.QUEUED:
        line = f"cancel requested: {where} removes {args.name} from the queue"
    else:
        line = (
            f"cancel requested: {where} stops {args.name} at the next epoch boundary "
            "and pushes; the machine is kept"
        )
    if args.format == "json":
        print_json(
            {"cancel_requested": True, "name": args.name, "by": str(owner) if owner else None}
        )
    else:
        print(line)
    return Outcome.OK
