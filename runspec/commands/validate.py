"""`runspec validate PATH...`: check spec files, or every *.yaml / *.yml under folders."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from runspec.commands import add_format, print_json
from runspec.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Problem, RunspecError

SUFFIXES = (".yaml", ".yml")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="spec files or folders (recursive)"
    )
    add_format(parser)


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def spec_files(path: Path) -> Iterator[Path]:
    """The path itself if it is not a folder; else its *.yaml/*.yml files, skipping hidden
    entries (.git, .pre-commit-config.yaml), in a stable order."""
    if not path.is_dir():
        yield path
        return
    for found in sorted(path.rglob("*")):
        if found.suffix in SUFFIXES and not _hidden(found, path) and not found.is_dir():
            yield found


def run(args: argparse.Namespace) -> int:
    from runspec.loader import check_spec_file  # here: other commands need not load it

    problems: list[Problem] = []
    code = EXIT_OK
    checked = invalid = 0
    for root in args.paths:
        if not root.exists() and not root.is_symlink():
            print(f"runspec: {root}: no such file or folder", file=sys.stderr)
            code = EXIT_USAGE
            continue
        files = list(spec_files(root))
        if not files:
            print(f"runspec: {root}: no *.yaml or *.yml files", file=sys.stderr)
            code = EXIT_USAGE
        for path in files:
            try:
                found = check_spec_file(path)
            except RunspecError as exc:
                print(f"runspec: {exc}", file=sys.stderr)
                code = EXIT_USAGE
                continue
            checked += 1
            if found:
                invalid += 1
                problems.extend(found)
                if code == EXIT_OK:
                    code = EXIT_FAILED
    if args.format == "json":
        print_json([p.as_dict() for p in problems])
    else:
        for problem in problems:
            print(problem)
        noun = "spec" if checked == 1 else "specs"
        if invalid:
            many = "problem" if len(problems) == 1 else "problems"
            print(f"{len(problems)} {many} in {invalid} of {checked} {noun}", file=sys.stderr)
        elif checked:
            print(f"{checked} {noun} valid", file=sys.stderr)
    return code
