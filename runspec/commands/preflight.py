"""`runspec preflight SPEC`: check this machine against this spec, without training."""

from __future__ import annotations

import argparse
from pathlib import Path

from runspec.commands import add_format, add_state, print_json, state_dir
from runspec.errors import Outcome

# The checks take seconds; a hung driver or collective must still end the command.
DEFAULT_TIMEOUT_S = 300.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", type=Path, help="the run spec (YAML)")
    add_state(parser)
    add_format(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"hard limit for all checks, in seconds (default {DEFAULT_TIMEOUT_S:.0f})",
    )
    parser.add_argument(
        "--collective-one-gpu",
        action="store_true",
        help="run the collective (NCCL all_reduce) check on a single GPU too: proves NCCL "
        "loads and runs on this card before renting several of it",
    )


def run(args: argparse.Namespace) -> Outcome:
    from runspec.preflight import run_preflight
    from runspec.spec.loader import load_spec
    from runspec.store.paths import RunPaths

    spec = load_spec(args.spec)
    paths = RunPaths.for_spec(spec, state_dir(args))
    report = run_preflight(
        spec, paths, "all", timeout=args.timeout, collective_one_gpu=args.collective_one_gpu
    )
    if args.format == "json":
        print_json(report.to_json())
    else:
        print(report.render_text())
    return Outcome.FAILED if report.failed else Outcome.OK
