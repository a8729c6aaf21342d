"""`runspec rm NAME`: retire a finished (or damaged) run, so its name can be used again.

Its record and job folder go (the spec, provenance, logs, staged copies); the run folder and
every pushed copy stay unless asked: the weights are the point of the run.
"""

from __future__ import annotations

import argparse
import shutil
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from runspec.commands import add_format, add_name, add_state, print_json, state_dir
from runspec.errors import Outcome

if TYPE_CHECKING:
    from runspec.paths import StateLayout


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_name(parser)
    parser.add_argument(
        "--run-folder",
        action="store_true",
        help="also delete the run folder (its weights on this machine); pushed copies stay",
    )
    add_state(parser)
    add_format(parser)


def own_job_folder(layout: StateLayout, name: str) -> Path | None:
    """The run's job folder, a real folder right inside the jobs folder (neither a link,
    nor reached through one); None when there is none."""
    # lstat: a link planted as jobs/ or jobs/NAME is never followed into its target.
    try:
        modes = [path.lstat().st_mode for path in (layout.jobs, layout.jobs / name)]
    except FileNotFoundError:
        return None
    return layout.jobs / name if all(stat.S_ISDIR(mode) for mode in modes) else None


def run(args: argparse.Namespace) -> Outcome:
    from runspec.errors import RunspecError, UsageError
    from runspec.owner import RunLock
    from runspec.paths import StateLayout
    from runspec.printable import printable
    from runspec.state import DamagedRecord, RecordStore, RunStatus

    state = state_dir(args)
    layout = StateLayout(state)
    store = RecordStore(state)
    job_dir = own_job_folder(layout, args.name)
    # Only a folder that holds a record (readable or damaged) is a run: anything else in
    # jobs/ is not rm's to delete.
    if job_dir is None or not (job_dir / "record.json").is_file():
        raise UsageError(f"no such run: {args.name!r} in {state}")
    paths = layout.run_paths(args.name)
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
        shutil.rmtree(job_dir)
        removed = [str(job_dir)]
        if args.run_folder and run_dir.exists():
            shutil.rmtree(run_dir)
            removed.append(str(run_dir))
    finally:
        lock.release()
    kept = [] if args.run_folder or not run_dir.exists() else [str(run_dir)]
    if args.format == "json":
        print_json({"removed": removed, "kept": kept, "name": args.name})
    else:
        print(printable(f"removed run {args.name}: {', '.join(removed)}"))
        for folder in kept:
            print(printable(f"kept its run folder {folder} (--run-folder deletes it too)"))
    return Outcome.OK
