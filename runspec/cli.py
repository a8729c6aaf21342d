"""`runspec`: the command line. Exit codes come from here and nowhere else.

Each command lives in `runspec/commands/<name>.py` with `add_arguments(parser)` and
`run(args) -> int`; command modules keep heavy imports inside `run`, so `runspec validate`
starts without torch, libreyolo, huggingface_hub or apscheduler.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from runspec import __version__, redact
from runspec.errors import EXIT_USAGE, RunspecError
from runspec.printable import printable_lines, setup_logging

log = logging.getLogger("runspec")

# The commands that write a run's files.
OWNER_ONLY = frozenset({"run", "daemon", "preflight"})

# (command, module, one-line help), in the order `runspec --help` lists them.
COMMANDS: list[tuple[str, str, str]] = [
    ("validate", "validate", "check specs (files or folders, recursively)"),
    ("schema", "schema", "print the run spec's JSON Schema (for editors)"),
    ("cost", "cost", "what the run and the idle machine will cost; stop vs destroy"),
    ("preflight", "preflight", "check this machine against this spec, without training"),
    ("run", "run", "the whole lifecycle in the foreground, no daemon"),
    ("submit", "submit", "validate a spec, record its provenance, copy it into the inbox"),
    ("daemon", "daemon", "the daemon in the foreground (what runspecd.service runs)"),
    ("status", "status", "runs, epoch, ETA, best metric, last verified push, budget, cost"),
    ("logs", "logs", "a run's training log (-f follows it)"),
    ("cancel", "cancel", "stop a run at the next epoch boundary, push, keep the machine"),
    ("rm", "rm", "retire a finished run so its name is free; its weights stay"),
    ("install", "install", "put the systemd unit, folders and default config in place"),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="runspec",
        description="Declarative LibreYOLO training runs on rented GPU machines.",
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
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Before anything can log: no record, debug ones included, ever carries a secret.
    redact.install()
    parser = build_parser()
    args = parser.parse_args(argv)
    # Commands print what a person needs; the log adds detail only with -v. The daemon sets
    # up its own logging for the journal.
    setup_logging(
        logging.DEBUG
        if args.verbose
        else logging.INFO
        if args.command == "daemon"
        else logging.WARNING,
        "%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command in OWNER_ONLY:
        # As runspecd.service's UMask=0077, wherever it runs (a terminal, a container without
        # systemd): run folders, weights, pushed copies and records are their owner's alone.
        os.umask(0o077)
    # APScheduler logs every job run at INFO: noise in a journal that people read.
    logging.getLogger("apscheduler").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    try:
        code: int = args._run(args)
    except RunspecError as exc:
        log.debug("command failed", exc_info=True)
        print(f"runspec: {printable_lines(redact.scrub(str(exc)))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_USAGE
    return code


def entrypoint() -> None:
    sys.exit(main())
