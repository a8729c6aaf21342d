"""`runspec`: the command line. Exit codes come from here and nowhere else.

Each command lives in `runspec/commands/<name>.py` with `add_arguments(parser)` and
`run(args) -> Outcome`; command modules keep heavy imports inside `run`, so `runspec validate`
starts without torch, libreyolo, huggingface_hub or apscheduler.

One rule for every command (the README's table):

    0  it did what was asked: every spec valid, every check passed, the run completed (or the
       budget stopped it) with its final push verified
    1  it did it and the answer is a failure: the run failed, a preflight check failed
    2  the command was used wrongly, a file could not be read, or a spec is invalid
    3  the run ended but its final push could not be verified
    75 (`run` under an engine only) give the run a fresh machine: a GPU that failed the
       preflight, an NCCL failure, a stop signal after the newest checkpoint was pushed

With `--json` (or `--format json`) standard output holds only JSON, errors included.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from runspec import __version__
from runspec.errors import EXIT_CODES, Outcome, RunspecError, SpecInvalid
from runspec.printable import printable_lines
from runspec.secrets import redact
from runspec.secrets.apartuid import set_apart, trainers_are_units
from runspec.secrets.undumpable import make_undumpable
from runspec.voice import Stream, setup_logging

log = logging.getLogger("runspec")

# The commands that write a run's files.
OWNER_ONLY = frozenset({"run", "daemon", "preflight", "push"})
STARTS_TRAINERS = frozenset({"run", "daemon"})

# (command, module, one-line help), in the order `runspec --help` lists them.
COMMANDS: list[tuple[str, str, str]] = [
    ("validate", "validate", "check specs (files or folders, recursively)"),
    ("schema", "schema", "print the run spec's JSON Schema (for editors)"),
    ("cost", "cost", "what the run and the idle machine will cost; stop vs destroy"),
    ("plan", "plan", "what each spec would do and cost: for a pull request (text, json, markdown)"),
    ("preflight", "preflight", "check this machine against this spec, without training"),
    ("run", "run", "the whole lifecycle in the foreground, no daemon"),
    ("export", "export", "the spec as a SkyPilot or dstack task file (the engine rents)"),
    ("launch", "launch", "submit the spec to Hugging Face Jobs (HF's GPUs, per minute)"),
    ("submit", "submit", "validate a spec, record its provenance, copy it into the inbox"),
    ("daemon", "daemon", "the daemon in the foreground (what runspecd.service runs)"),
    ("status", "status", "runs, epoch, ETA, best metric, last verified push, budget, cost"),
    ("logs", "logs", "a run's story: runspec's lines and the training's output (-f follows)"),
    ("cancel", "cancel", "stop a run at the next epoch boundary, push, keep the machine"),
    ("rm", "rm", "retire a finished run so its name is free; its weights stay"),
    ("push", "push", "push and verify what a finished run left unverified; no finish applied"),
    ("watch", "watch", "end boxes whose Hub lease expired (run anywhere but the box)"),
    ("install", "install", "put the systemd unit, folders and default config in place"),
]


def exit_code(outcome: Outcome) -> int:
    return EXIT_CODES[outcome]


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (read before parsing: a parse error too is
    answered in JSON then)."""
    args = list(argv)
    if "--json" in args or "--format=json" in args:
        return True
    return any(a == "--format" and b == "json" for a, b in itertools.pairwise(args))


def print_error(as_json: bool, outcome: Outcome, message: str, **extra: object) -> None:
    if as_json:
        json.dump(
            {"error": outcome.value, "message": redact.scrub(message), **extra},
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
        sys.stdout.flush()
    else:
        print(f"runspec: {printable_lines(redact.scrub(message))}", file=sys.stderr)


class Parser(argparse.ArgumentParser):
    """argparse, with its usage errors in JSON when the command line asks for JSON."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if not Parser.json_errors:
            super().error(message)
        print_error(True, Outcome.USAGE, f"{self.prog}: {message}")
        sys.exit(exit_code(Outcome.USAGE))


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="runspec",
        description="Declarative LibreYOLO training runs on rented GPU machines.",
        epilog="exit status: 0 done, 1 a run or a check failed, 2 a bad command line, file or "
        "spec, 3 the run ended but its final push was not verified, 75 (under an engine) give the "
        "run a fresh machine",
    )
    parser.add_argument("--version", action="version", version=f"runspec {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="debug logging, tracebacks included"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module_name, help_text in COMMANDS:
        module = importlib.import_module(f"runspec.commands.{module_name}")
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        # -v after the command too (`runspec daemon -v`); SUPPRESS keeps the one given first.
        cmd.add_argument(
            "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug logging"
        )
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Before anything can log: no record, debug ones included, ever carries a secret.
    redact.install()
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = wants_json(argv)
    Parser.json_errors = as_json
    parser = build_parser()
    if not argv:  # `runspec` alone: what it can do, not an error about a missing command
        parser.print_help()
        return exit_code(Outcome.OK)
    args = parser.parse_args(argv)
    # Commands print what a person needs; logging adds detail only with -v. The daemon and
    # `run` point it at their own stream.
    setup_logging(Stream(sys.stderr), args.verbose)
    if args.command in OWNER_ONLY:
        # As runspecd.service's UMask=0077, wherever it runs (a terminal, a container without
        # systemd): run folders, weights, pushed copies and records are their owner's alone.
        os.umask(0o077)
        # They hold the keys: no child of theirs may read their environment (secrets.undumpable).

        make_undumpable()
    if args.command in STARTS_TRAINERS and not trainers_are_units():
        # Nor signal them: a trainer outside systemd is uid 0 too (secrets.apartuid).
        apart = set_apart()
        if apart is not None:
            log.debug("%s", apart)
    try:
        outcome = args._run(args)
    except SpecInvalid as exc:
        problems = [p.as_dict() for p in exc.problems]
        print_error(as_json, exc.outcome, str(exc), problems=problems)
        return exit_code(exc.outcome)
    except RunspecError as exc:
        log.debug("command failed", exc_info=True)
        print_error(as_json, exc.outcome, str(exc))
        return exit_code(exc.outcome)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return exit_code(Outcome.USAGE)
    if not isinstance(outcome, Outcome):
        raise TypeError(f"runspec {args.command} returned {outcome!r}, not an Outcome")
    return exit_code(outcome)


def entrypoint() -> None:
    sys.exit(main())
