"""`runspec schema`: print the run spec's JSON Schema, for editors and other tools."""

from __future__ import annotations

import argparse
import sys

from runspec.commands import add_format
from runspec.errors import Outcome


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_format(parser)  # the schema is JSON either way; --json is taken for uniformity


def run(args: argparse.Namespace) -> Outcome:
    # here, not at the top: keeps `runspec --help` light
    from runspec.spec.loader import SCHEMA_PATH

    sys.stdout.write(SCHEMA_PATH.read_text(encoding="utf-8"))
    return Outcome.OK
