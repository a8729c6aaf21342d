"""`runspec daemon`: the daemon in the foreground (what runspecd.service runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from runspec.commands import add_state


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_state(parser)
    parser.add_argument(
        "--inbox", type=Path, default=None, help="watched folder (default <state>/inbox)"
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="config file (default /etc/runspec/runspecd.yaml; missing means defaults)",
    )
    parser.add_argument("--once", action="store_true", help="exit when the queue is empty")
    parser.add_argument(
        "--dry-run", action="store_true", help="print finish actions instead of doing them"
    )


def run(args: argparse.Namespace) -> int:
    from runspec.daemon.config import load_config
    from runspec.daemon.loop import main

    config = load_config(
        args.config,
        state=args.state.absolute() if args.state else None,
        inbox=args.inbox.absolute() if args.inbox else None,
    )
    if args.dry_run:
        config = config.with_overrides(finish_dry_run=True)
    return main(config, args.config, once=args.once)
