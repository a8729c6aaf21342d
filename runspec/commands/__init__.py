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


def readable_state(args: argparse.Namespace, command: str) -> Path:
    """state_dir, once this user can read it and its jobs folder: another user's (root's
    /var/lib/runspec, 0700) is one line with the fix, not a traceback from deep inside."""
    import os
    import pwd

    from runspec.errors import UsageError
    from runspec.store.paths import StateLayout

    state = state_dir(args)
    for folder in (state, StateLayout(state).jobs):
        try:
            os.scandir(folder).close()
        except (FileNotFoundError, NotADirectoryError):
            break  # nothing there yet: the command says so itself
        except PermissionError as exc:
            try:
                owner = pwd.getpwuid(state.stat().st_uid).pw_name
            except (OSError, KeyError):
                owner = "another user"
            part = "" if folder == state else f" (its {folder.name}/)"
            raise UsageError(
                f"cannot read the state folder {state}{part}: permission denied, it is "
                f"{owner}'s: run it as its owner (sudo runspec {command} ...), or give "
                "--state a folder of your own"
            ) from exc
    return state


def daemon_inbox(given: Path | None, state: Path) -> Path:
    """The daemon's inbox: `given` (--inbox), else its config's, else <state>/inbox."""
    if given is not None:
        return Path(given).absolute()
    from runspec.daemon.config import load_config
    from runspec.errors import RunspecError

    try:
        return load_config(None, state=state).inbox
    except RunspecError:
        return state / "inbox"  # a broken config is the daemon's to report


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
    # A pipe is block-buffered: `runspec watch --json | jq` (a pass every --every) would see
    # each pass only once a buffer filled, minutes late.
    sys.stdout.flush()
