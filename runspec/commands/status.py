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
    from runspec.errors import UsageError
    from runspec.owner import daemon_holder
    from runspec.paths import StateLayout
    from runspec.printable import printable_lines
    from runspec.state import RecordStore
    from runspec.views.runinfo import damaged_info, info, table

    state = state_dir(args)
    store = RecordStore(state)
    while True:
        scan = store.scan()
        rows = [info(state, r, SYSTEM.time()) for r in scan.records]
        rows += [damaged_info(d) for d in scan.damaged]
        if args.name:
            rows = [r for r in rows if r["name"] == args.name]
            if not rows:
                raise UsageError(f"no run named {args.name!r} in {state}")
        if args.format == "json":
            print_json(rows)
        else:
            if args.watch:
                sys.stdout.write("\x1b[H\x1b[2J")
            daemon = daemon_holder(StateLayout(state))
            print(f"runspecd: {'running, ' + str(daemon) if daemon else 'not running'} ({state})")
            # Run folders come from specs: escaped, so a value cannot drive the terminal.
            print(printable_lines(table(rows)) if rows else "no runs")
        sys.stdout.flush()
        if not args.watch:
            return 0
        SYSTEM.sleep(WATCH_EVERY)
