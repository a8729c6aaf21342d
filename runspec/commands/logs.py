"""`runspec logs NAME [-f]`: the run's training log; -f follows it until the run ends."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runspec.commands import add_state, state_dir

FOLLOW_POLL = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the run's name")
    parser.add_argument("-f", "--follow", action="store_true", help="follow until the run ends")
    parser.add_argument(
        "--runspec", action="store_true", help="runspec's own log for the run, not training's"
    )
    add_state(parser)


def log_file(state: Path, name: str, own: bool) -> Path:
    from runspec.paths import StateLayout

    paths = StateLayout(state).run_paths(name)
    if own:
        return paths.runspec_log
    candidates = [paths.run_dir / "train.log", paths.run_dir / "console.log"]
    for path in candidates:
        if path.exists():
            return path
    return candidates[0]


def run(args: argparse.Namespace) -> int:
    from runspec.clock import SYSTEM
    from runspec.errors import UsageError
    from runspec.state import RecordStore, RunStatus

    state = state_dir(args)
    store = RecordStore(state)
    if store.load(args.name) is None:
        raise UsageError(f"no run named {args.name!r} in {state}")
    offset = 0
    while True:
        record = store.load(args.name)
        # Read once more after the run ended, so the log's tail is never lost.
        done = not args.follow or record is None or record.status is RunStatus.FINISHED
        path = log_file(state, args.name, args.runspec)
        try:
            with path.open("rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
        except FileNotFoundError:
            chunk = b""
        if chunk:
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
            offset += len(chunk)
        if done:
            if not chunk and offset == 0 and not args.follow:
                print(f"(no log yet at {path})", file=sys.stderr)
            return 0
        SYSTEM.sleep(FOLLOW_POLL)
