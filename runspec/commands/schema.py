"""`runspec schema`: print the run spec's JSON Schema, for editors and other tools."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options: the schema is one document


def run(args: argparse.Namespace) -> int:
    from runspec.loader import SCHEMA_PATH  # here, not at the top: keeps `runspec --help` light

    sys.stdout.write(SCHEMA_PATH.read_text(encoding="utf-8"))
    return 0
