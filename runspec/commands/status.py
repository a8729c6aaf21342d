"""`runspec status [NAME]`: the runs under way (all of them with -a), with epoch, ETA, best
metric, last verified push, budget and cost; the specs waiting in the inbox and those the
daemon refused, with its reason. Reads the state folder and the inbox only: it answers with no
daemon running."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from runspec.commands import (
    add_format,
    add_name,
    add_state,
    daemon_inbox,
    print_json,
    readable_state,
)
from runspec.errors import Outcome

WATCH_EVERY = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_name(parser, optional=True, what="one run (default: every run under way)")
    parser.add_argument(
        "-a",
        "--all",
        action="store_true",
        help="finished runs too, and every refused spec (not only the last day's)",
    )
    add_format(parser)
    add_state(parser)
    parser.add_argument(
        "--inbox", type=Path, default=None, help="the daemon's inbox (default: its config's)"
    )
    parser.add_argument("--watch", action="store_true", help="redraw every 2 s until Ctrl-C")
    parser.add_argument(
        "--hub",
        metavar="ORG",
        default=None,
        help="the organisation's runs, from the Hub alone (their repos' records; cached)",
    )


def _age_key(row: dict[str, Any]) -> tuple[bool, float]:
    """Newest first; a run whose age is unknown goes last."""
    age = row.get("age_seconds")
    return (age is None, age if age is not None else 0.0)


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _hub(args: argparse.Namespace) -> Outcome:
    from runspec.clock import SYSTEM
    from runspec.push.fleetread import fleet
    from runspec.views.hubfleet import fleet_json, lines

    rows = fleet(args.hub, SYSTEM.time())
    if args.format == "json":
        print_json(fleet_json(args.hub, rows))
    else:
        for line in lines(args.hub, rows):
            print(line)
    return Outcome.OK


def run(args: argparse.Namespace) -> Outcome:
    from runspec.clock import SYSTEM
    from runspec.errors import UsageError
    from runspec.printable import printable_lines
    from runspec.store.hint import command
    from runspec.store.owner import daemon_holder
    from runspec.store.paths import StateLayout
    from runspec.store.state import RecordStore, RunStatus
    from runspec.views.finished import finished_summary
    from runspec.views.followview import following
    from runspec.views.inboxview import ignored, rejected, waiting
    from runspec.views.runinfo import damaged_info, info
    from runspec.views.statustable import ignored_text, table

    if args.hub:
        return _hub(args)
    state = readable_state(args, "status")
    if not state.is_dir():  # a mistyped --state is no folder, not an idle machine
        raise UsageError(
            f"no state folder {state}: check --state (or RUNSPEC_STATE); "
            "on a new machine, `sudo runspec install` makes it"
        )
    inbox = daemon_inbox(args.inbox, state)
    store = RecordStore(state)
    while True:
        now = SYSTEM.time()
        scan = store.scan()
        records = scan.records
        finished = [r for r in records if r.status is RunStatus.FINISHED]
        if not (args.all or args.name):
            records = [r for r in records if r.status is not RunStatus.FINISHED]
        # Newest first: the run just submitted heads the list, last week's runs trail it.
        rows = sorted((info(state, r, now) for r in records), key=_age_key)
        rows += [damaged_info(d, state) for d in scan.damaged]
        if args.name:
            rows = [r for r in rows if r["name"] == args.name]
            # A spec submitted under this name and not yet taken (no daemon yet, or a queue).
            if not rows:
                queued = waiting(inbox) + rejected(inbox, now, True)
                rows = [r for r in queued if Path(r["name"]).stem == args.name]
            if not rows:
                raise UsageError(f"no run named {args.name!r} in {state}")
        else:
            rows += waiting(inbox) + rejected(inbox, now, args.all)
        for row in rows:
            if row["status"] == "rejected":  # rm takes the path status shows
                given = f" --inbox {shlex.quote(str(inbox))}" if args.inbox else ""
                clear = command(f"rm {shlex.quote(row['file'])}{given}", state)
                row["clear"] = f"`{clear}` clears it"
        stray = [] if args.name else ignored(inbox)
        daemon = daemon_holder(StateLayout(state))
        if args.format == "json":
            print_json(
                {
                    "state": str(state),
                    "daemon": {"running": daemon is not None, "held_by": _str(daemon)},
                    "runs": rows,
                    "inbox": {"folder": str(inbox), "ignored": stray},
                }
            )
        else:
            if args.watch:
                sys.stdout.write("\x1b[H\x1b[2J")
            print(f"runspecd: {'running, ' + str(daemon) if daemon else 'not running'} ({state})")
            for line in following(state):
                print(printable_lines(line))
            # Run folders and file names come from specs: escaped, so none drives the terminal.
            print(printable_lines(table(rows)) if rows else "no runs under way")
            if stray:
                print(printable_lines(ignored_text(stray)))
            if args.name and (summary := finished_summary(state, args.name)) is not None:
                print(printable_lines("\n".join(summary)))
            hidden = len(finished) if not (args.all or args.name) else 0
            if hidden:
                print(f"({hidden} finished: {command('status -a', state)} shows them)")
        sys.stdout.flush()
        if not args.watch:
            return Outcome.OK
        SYSTEM.sleep(WATCH_EVERY)
