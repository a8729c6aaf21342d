"""`runspec rm NAME`: retire a finished (or damaged) run, so its name can be used again.

Its record and job folder go (the spec, provenance, logs, staged copies); the run folder and
every pushed copy stay unless asked: the weights are the point of the run.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from runspec.commands import add_format, add_state, print_json, state_dir
from runspec.errors import Outcome
from runspec.retire import clear, rejected_entry, set_aside


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the run's name")
    parser.add_argument(
        "--run-folder",
        action="store_true",
        help="also delete the run folder (its weights on this machine); pushed copies stay",
    )
    add_state(parser)
    add_format(parser)


def run(args: argparse.Namespace) -> Outcome:
    from runspec.errors import RunspecError
    from runspec.owner import RunLock
    from runspec.paths import StateLayout
    from runspec.printable import printable
    from runspec.state import DamagedRecord, RecordStore, RunStatus

    state = state_dir(args)
    layout = StateLayout(state)
    store = RecordStore(state)
    try:
        paths = layout.run_paths(args.name)
    except RunspecError:
        return _rm_rejected(args, state)  # not a run's name; maybe a rejected file's
    if not paths.job_dir.is_dir():
        return _rm_rejected(args, state)
    try:
        record = store.load(args.name)
    except DamagedRecord:
        record = None  # a damaged run is exactly what rm is for
    if record is not None and record.status is not RunStatus.FINISHED:
        raise RunspecError(
            f"run {args.name!r} is still {record.status.value}; stop it first with "
            f"`runspec cancel {args.name}`, then rm it once it has finished"
        )
    lock = RunLock(paths)
    lock.acquire()  # nobody may be driving it while its folder goes
    try:
        run_dir = paths.run_dir
        shutil.rmtree(paths.job_dir)
        removed = [str(paths.job_dir)]
        if args.run_folder and run_dir.exists():
            shutil.rmtree(run_dir)
            removed.append(str(run_dir))
        # Kept, but out of the name's way: a new run of this name starts in a fresh folder.
        aside = None if args.run_folder else set_aside(run_dir, time.time())
    finally:
        lock.release()
    kept = [str(aside)] if aside is not None else []
    if args.format == "json":
        print_json({"removed": removed, "kept": kept, "name": args.name})
    else:
        print(printable(f"removed run {args.name}: {', '.join(removed)}"))
        for folder in kept:
            print(printable(f"kept its run folder as {folder}; the name {args.name} is free"))
    return Outcome.OK


def _rm_rejected(args: argparse.Namespace, state: Path) -> Outcome:
    """`runspec rm FILE` of an inbox entry that was rejected: FILE and its .error go."""
    from runspec.errors import UsageError
    from runspec.printable import printable

    inbox = state / "inbox"
    found = rejected_entry(inbox, args.name)
    if not found:
        raise UsageError(
            f"no run named {args.name!r} in {state}, nor a rejected inbox entry of that name"
        )
    clear(found)
    removed = [str(p) for p in found]
    if args.format == "json":
        print_json({"removed": removed, "kept": [], "name": args.name})
    else:
        print(printable(f"removed the rejected inbox entry {args.name}: {', '.join(removed)}"))
    return Outcome.OK
