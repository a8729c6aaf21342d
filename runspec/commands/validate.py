"""`runspec validate PATH...`: check spec files, or every *.yaml / *.yml under folders."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from runspec.commands import add_format, print_json
from runspec.errors import Outcome, Problem, RunspecError
from runspec.printable import printable

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


# A spec's top-level `runspec:` key; a folder also holds YAML that is no spec (a GitHub
# workflow, a LibreYOLO data.yaml), and reporting those as broken specs buries the real ones.
_RUNSPEC_KEY = re.compile(rb"^runspec[ \t]*:", re.MULTILINE)


def _not_a_spec(path: Path) -> bool:
    """A regular file found in a folder with no top-level `runspec:` key (a file that cannot
    be read is checked, so that it is reported)."""
    try:
        if not path.is_file() or path.is_symlink():
            return False
        with path.open("rb") as fh:
            head = fh.read(1 << 20)
    except OSError:
        return False
    return _RUNSPEC_KEY.search(head) is None


def run(args: argparse.Namespace) -> Outcome:
    from runspec.spec.loader import check_spec_file  # here: other commands need not load it

    problems: list[Problem] = []
    unreadable: list[tuple[Problem, str]] = []  # files that could not be read, and the line
    checked = invalid = skipped = 0
    for root in args.paths:
        if not root.exists() and not root.is_symlink():
            why = "no such file or folder"
            unreadable.append((Problem(str(root), 1, 1, "", why), f"{root}: {why}"))
            continue
        files = list(spec_files(root))
        if root.is_dir():
            specs = [f for f in files if not _not_a_spec(f)]
            skipped += len(files) - len(specs)
            files = specs
        if not files:
            why = "no runspec specs (no *.yaml or *.yml with a `runspec:` key)"
            unreadable.append((Problem(str(root), 1, 1, "", why), f"{root}: {why}"))
        for path in files:
            try:
                found = check_spec_file(path)
            except RunspecError as exc:
                unreadable.append((Problem(str(path), 1, 1, "", str(exc)), str(exc)))
                continue
            checked += 1
            if found:
                invalid += 1
                problems.extend(found)
    if args.format == "json":
        # One shape for one file or a thousand: the counts, then every problem.
        print_json(
            {
                "valid": checked - invalid,
                "invalid": invalid,
                "skipped": skipped,
                "unreadable": len(unreadable),
                "problems": [p.as_dict() for p in [*(u for u, _ in unreadable), *problems]],
            }
        )
    else:
        for _, line in unreadable:
            print(f"runspec: {printable(line)}", file=sys.stderr)
        for problem in problems:
            print(problem)
        noun = "spec" if checked == 1 else "specs"
        if invalid:
            many = "problem" if len(problems) == 1 else "problems"
            print(f"{len(problems)} {many} in {invalid} of {checked} {noun}", file=sys.stderr)
        elif checked:
            print(f"{checked} {noun} valid", file=sys.stderr)
        if skipped:
            other = "file" if skipped == 1 else "files"
            print(f"skipped {skipped} YAML {other} with no `runspec:` key", file=sys.stderr)
    # As every validator: 1 when the answer is "invalid", 2 when the job could not be done.
    if unreadable:
        return Outcome.USAGE
    return Outcome.FAILED if invalid else Outcome.OK
