"""`runspec cost SPEC`: what the run and the idle machine will cost; stop vs destroy."""

# Imports inside run(): `runspec --help` builds every parser and must stay quick.

from __future__ import annotations

import argparse
from pathlib import Path

from runspec.commands import add_format, print_json
from runspec.errors import Outcome


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", type=Path, help="the run spec (YAML)")
    add_format(parser)


def run(args: argparse.Namespace) -> Outcome:
    from runspec.cost import estimate
    from runspec.spec.loader import load_spec

    result = estimate(load_spec(args.spec))
    if args.format == "json":
        print_json(result.to_json())
    else:
        print(result.render_text())
    return Outcome.OK
