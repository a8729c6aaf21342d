"""`runspec rm NAME`: retire a finished (or damaged) run, so its name can be used again.

Its record and job folder go (the spec, provenance, logs, staged copies); the run folder and
every pushed copy stay unless asked: the weights are the point of the run.

A run whose newest weights are not verified off this machine is not retired while its run
folder stays: its record is what keeps the machine from being destroyed under them. `--force`
retires it all the same and leaves a tombstone the machine's verdict still counts
(runspec.tombstone).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from runspec.commands import add_format, add_state, print_json, state_dir
from runspec.errors import Outcome

if TYPE_CHECKING:
    from runspec.paths import RunPaths, StateLayout


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the run's name")
    parser.add_argument(
        "--run-folder",
        action="store_true",
        help="also delete the run folder (its weights on this machine); pushed copies stay",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="retire it even though its newest weights are not verified off this machine "
        "(a tombstone then keeps the machine from being destroyed while they are here)",
    )
    add_state(parser)
    add_format(parser)


def run(args: argparse.Namespace) -> Outcome:
    from runspec.errors import RunspecError, UsageError
    from runspec.owner import RunLock
    from runspec.paths import StateLayout
    from runspec.printable import printable
    from runspec.state import DamagedRecord, RecordStore, RunStatus

    state = state_dir(args)
    layout = StateLayout(state)
    store = RecordStore(state)
    paths = layout.run_paths(args.name)
    if not paths.job_dir.is_dir():
        raise UsageError(f"no run named {args.name!r} in {state}")
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
    buried = None
    try:
        run_dir = paths.run_dir
        if not args.run_folder and run_dir.exists():
            buried = _unsafe_left(layout, paths, force=args.force)
        shutil.rmtree(paths.job_dir)
        removed = [str(paths.job_dir)]
        if args.run_folder and run_dir.exists():
            shutil.rmtree(run_dir)
            removed.append(str(run_dir))
    finally:
        lock.release()
    kept = [] if args.run_folder or not run_dir.exists() else [str(run_dir)]
    tomb = str(buried) if buried is not None else None
    if args.format == "json":
        print_json({"removed": removed, "kept": kept, "name": args.name, "tombstone": tomb})
    else:
        print(printable(f"removed run {args.name}: {', '.join(removed)}"))
        for folder in kept:
            print(printable(f"kept its run folder {folder} (--run-folder deletes it too)"))
        if tomb is not None:
            print(
                printable(
                    f"its unverified weights stay in {run_dir}; until they are gone the "
                    f"machine is never destroyed (tombstone {tomb})"
                )
            )
    return Outcome.OK


def _unsafe_left(layout: StateLayout, paths: RunPaths, *, force: bool) -> Path | None:
    """Refuse (or, forced, bury) a run whose run folder stays with unverified weights in it."""
    from runspec.errors import RunspecError
    from runspec.loader import load_spec
    from runspec.model import DEFAULT_PUSH_FILES
    from runspec.tombstone import bury, local_files
    from runspec.verdict import demanded, files_safety

    try:
        spec = load_spec(paths.spec_file)
    except (RunspecError, OSError) as exc:
        why = f"its spec cannot be read ({exc}), so its weights cannot be judged safe"
        rels: list[str] = []
    else:
        safety = files_safety(paths, spec)
        if safety.safe:
            return None
        globs = spec.push.files if spec.push is not None else DEFAULT_PUSH_FILES
        why, rels = safety.why, demanded(paths.run_dir, globs)[0]
    files = local_files(paths.run_dir, rels)
    if not files:
        return None
    if not force:
        raise RunspecError(
            f"run {paths.name!r} is not retired: {why}. Its record is what keeps this machine "
            f"from being destroyed under {len(files)} files in {paths.run_dir}; push them "
            "somewhere first, or `--run-folder` to delete them, or `--force` to retire it and "
            "leave a tombstone that still keeps the machine from being destroyed"
        )
    return bury(layout, paths.name, paths.run_dir, files, why)
