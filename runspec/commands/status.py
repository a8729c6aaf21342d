"""`runspec status [NAME]`: runs, epoch, ETA, best metric, last verified push, budget, cost."""

from __future__ import annotations

import argparse
import sys

from runspec.commands import add_format, add_state, print_json, state_dir

WATCH_EVERY = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="one run (default: all)")
    add_format(parser)
    add_state(parser)
    parser.add_argument("--watch", action="store_true", help="redraw every 2 s until Ctrl-C")


def run(args: argparse.Namespace) -> int:
    from runspec.clock import SYSTEM
    from runspec.daemon.lock import StateLock
    from runspec.daemon.runinfo import info, table
    from runspec.errors import UsageError
    from runspec.state import RecordStore

    state = state_dir(args)
    store = RecordStore(state)
    while True:
        if args.name:
            record = store.load(args.name)
            if record is None:
                raise UsageError(f"no run named {args.name!r} in {state}")
            records = [record]
        else:
            records = store.all()
        rows = [info(state, r, SYSTEM.time()) for r in records]
        if args.format == "json":
            print_json(rows)
        else:
            if args.watch:
                sys.stdout.write("\x1b[H\x1b[2J")
            daemon = StateLock.holder(state)
            print(
                f"runspecd: {'running, pid ' + str(daemon) if daemon else 'not running'} ({state})"
            )
            print(table(rows) if rows else "no runs")
        sys.stdout.flush()
        if not args.watch:
            return 0
        SYSTEM.sleep(WATCH_EVERY)
