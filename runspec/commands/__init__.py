"""One module per command; see runspec.cli. Shared argument helpers live here."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text)"
    )
    parser.add_argument(
        "--json", dest="format", action="store_const", const="json", help="same as --format json"
    )


def add_name(parser: argparse.ArgumentParser, *, optional: bool = False, what: str = "") -> None:
    """The NAME argument: only what the spec's `name` rule accepts (runspec.spec.runname)."""
    from runspec.spec.runname import run_name

    parser.add_argument(
        "name", nargs="?" if optional else None, type=run_name, help=what or "the run's name"
    )


def add_state(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state",
        type=Path,
        default=None,
        help="state folder (default $RUNSPEC_STATE, else /var/lib/runspec for root, else "
        "~/.local/state/runspec)",
    )


def state_dir(args: argparse.Namespace) -> Path:
    from runspec.store.paths import default_state_dir

    return (args.state or default_state_dir()).absolute()


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
    # A pipe is block-buffered: `runspec watch --json | jq` (a pass every --every) would see
    # each pass only once a buffer filled, minutes late.
    sys.stdout.flush()
