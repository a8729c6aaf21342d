"""`runspec watch ORG|REPO...`: the off-box dead-man's switch, run anywhere but the box.

Each pass reads every run's lease (an ORG: its model repos tagged `runspec`; a REPO: that one)
and ends the boxes that stopped vouching for themselves (runspec.watch.act). `--install hf-jobs
ORG` makes an HF scheduled job that runs `runspec watch --once ORG` every 10 minutes instead.
Exit 0 when every repo was read and every needed end confirmed; 1 otherwise (fail closed).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from runspec.commands import add_format, print_json
from runspec.errors import Outcome, UsageError
from runspec.watch import NOTIFY_VARIABLE


def _duration(text: str) -> float:
    from runspec.units import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets",
        nargs="+",
        metavar="ORG|REPO",
        help="an org (its runspec repos) or owner/name repos",
    )
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    parser.add_argument("--every", type=_duration, default=300.0, help="between passes (5m)")
    parser.add_argument("--dry-run", action="store_true", help="say what it would end; end none")
    parser.add_argument(
        "--grace", type=_duration, default=None, help="after the lease expired (default: one lease)"
    )
    parser.add_argument(
        "--destroy-unverified-after",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="where the provider cannot stop (Lambda, Hetzner): destroy a box holding "
        "unverified weights this long after it should have ended (default: never)",
    )
    parser.add_argument(
        "--notify",
        action="append",
        default=os.environ.get(NOTIFY_VARIABLE, "").split(),
        metavar="URL",
        help=f"an apprise URL for what needs a person (repeatable; default "
        f"${NOTIFY_VARIABLE}, space-separated: how the scheduled job gets them)",
    )
    parser.add_argument(
        "--install",
        choices=("hf-jobs",),
        default=None,
        help="make an HF scheduled job that runs the watcher every 10 minutes",
    )
    add_format(parser)


def run(args: argparse.Namespace) -> Outcome:
    if args.install == "hf-jobs":
        from runspec.watch.install import install_hf_job

        if len(args.targets) != 1 or "/" in args.targets[0]:
            raise UsageError("--install hf-jobs takes one ORG")
        job = install_hf_job(args.targets[0], args.notify)
        if args.format == "json":
            print_json(job)
        else:
            print(
                f"runspec watch: scheduled job {job['id']} ({job['flavor']}, {job['schedule']},"
                f" about ${job['usd_per_day']:.2f}/day) watches {args.targets[0]}"
            )
        return Outcome.OK
    from runspec.clock import SYSTEM
    from runspec.store.paths import default_state_dir
    from runspec.watch.act import WatchOptions
    from runspec.watch.fleet import watch_pass
    from runspec.watch.memory import MEMORY

    MEMORY.keep_in(default_state_dir() / "watch-memory.json")  # an outage, across --once passes

    opts = WatchOptions(
        grace=args.grace,
        destroy_unverified_after=args.destroy_unverified_after,
        dry_run=args.dry_run,
    )
    as_json = args.format == "json"
    while True:
        seen, ok = watch_pass(args.targets, opts, args.notify, say=_say(as_json))
        if as_json:
            print_json({"ok": ok, "runs": [s.to_json() for s in seen]})
        if args.once:
            return Outcome.OK if ok else Outcome.FAILED
        SYSTEM.sleep(args.every)


def _say(as_json: bool) -> Callable[[str], None]:
    stream = sys.stderr if as_json else sys.stdout

    def say(line: str) -> None:
        print(line, file=stream, flush=True)

    return say
