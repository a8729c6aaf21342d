"""`runspec rm NAME`: retire a finished (or damaged) run, so its name can be used again.

Its record and job folder go (the spec, provenance, logs, staged copies); the run folder and
every pushed copy stay unless asked: the weights are the point of the run. Its Hub repo stays
as it is, and rm says so: a new run under the freed name does not push over it unless its spec
says so (runspec.push.owner_check.earlier_run).

A run whose newest weights are not verified off this machine is not retired while its run
folder stays: its record is what keeps the machine from being destroyed under them. `--force`
retires it all the same and leaves a tombstone the machine's verdict still counts
(runspec.store.tombstone).
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

from runspec.commands import (
    add_format,
    add_state,
    daemon_inbox,
    print_json,
    readable_state,
)
from runspec.errors import Outcome
from runspec.store.paths import RECORD, rejected_dir
from runspec.store.retire import aside_name, clear, rejected_entry
from runspec.views.inboxview import ERROR_SUFFIX

if TYPE_CHECKING:
    from runspec.store.paths import RunPaths, StateLayout


def _name_or_path(text: str) -> str:
    """argparse's `type=`: a run's NAME, or the path of a rejected inbox entry as `runspec
    status` shows it."""
    from runspec.spec.runname import run_name

    return text if "/" in text else run_name(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "name",
        type=_name_or_path,
        help="the run's name, or a rejected inbox entry (its file name or path, as status shows)",
    )
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
    parser.add_argument(
        "--inbox", type=Path, default=None, help="the daemon's inbox (default: its config's)"
    )
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
    from runspec.errors import UsageError
    from runspec.printable import printable
    from runspec.store.hint import command
    from runspec.store.owner import RunLock
    from runspec.store.paths import StateLayout
    from runspec.store.state import DamagedRecord, RecordStore, RunStatus

    state = readable_state(args, "rm")
    if "/" in args.name:
        return _rm_rejected(args, state)
    layout = StateLayout(state)
    store = RecordStore(state)
    job_dir = own_job_folder(layout, args.name)
    # Only a folder that holds a record (readable or damaged) is a run: anything else in
    # jobs/ is not rm's to delete. Not a run: maybe a rejected inbox entry's file name.
    if job_dir is None or not (job_dir / RECORD).is_file():
        return _rm_rejected(args, state)
    paths = layout.run_paths(args.name)
    try:
        record = store.load(args.name)
    except DamagedRecord:
        record = None  # a damaged run is exactly what rm is for
    if record is not None and record.status is RunStatus.FINISHING:
        raise UsageError(  # its end is decided: a cancel is refused now (runspec cancel)
            f"run {args.name!r} is applying its finish; rm it once it has finished "
            f"(`{command(f'status {args.name}', state)}`)"
        )
    if record is not None and record.status is not RunStatus.FINISHED:
        raise UsageError(
            f"run {args.name!r} is still {record.status.value}; stop it first with "
            f"`{command(f'cancel {args.name}', state)}`, then rm it once it has finished"
        )
    hub = _hub_left(paths)  # read before its spec goes with the job folder
    lock = RunLock(paths)
    lock.acquire()  # nobody may be driving it while its folder goes
    buried = aside = None
    try:
        run_dir = paths.run_dir
        removed = []
        if args.run_folder and run_dir.exists():
            shutil.rmtree(run_dir)
            removed.append(str(run_dir))
        elif run_dir.exists() or run_dir.is_symlink():
            # Kept, but out of the name's way: a new run of this name starts in a fresh folder.
            aside = aside_name(run_dir, time.time())
            unsafe = _unsafe_left(paths, force=args.force)
            if unsafe is not None:
                # The tombstone names the files where they will lie (a rename keeps their size
                # and mtime), and is written before they move and before the record goes: a
                # crash at any point leaves the record or the tombstone counting them.
                why, rels = unsafe
                buried = _bury(layout, paths.name, run_dir, aside, rels, why)
            os.rename(run_dir, aside)
        shutil.rmtree(job_dir)
        removed.insert(0, str(paths.job_dir))
    finally:
        lock.release()
    kept = [str(aside)] if aside is not None else []
    tomb = str(buried) if buried is not None else None
    due = _end_still_due(layout, args.name)
    if args.format == "json":
        print_json(
            {
                "removed": removed,
                "kept": kept,
                "name": args.name,
                "tombstone": tomb,
                "due": due,
                "hub": hub,
            }
        )
    else:
        print(printable(f"removed run {args.name}: {', '.join(removed)}"))
        if due:
            print(printable(due))
        for folder in kept:
            print(printable(f"kept its run folder as {folder}; the name {args.name} is free"))
        if hub is not None:
            print(printable(hub))
        if tomb is not None:
            print(
                printable(
                    f"its unverified weights stay in {aside}; until they are gone the "
                    f"machine is never destroyed (tombstone {tomb})"
                )
            )
    return Outcome.OK


def _hub_left(paths: RunPaths) -> str | None:
    """What happens to the run's Hub repo: it stays, and a new run of the freed name does not
    write over it unless told to (runspec.push.owner_check.earlier_run)."""
    from runspec.errors import RunspecError
    from runspec.spec.loader import load_accepted

    try:
        spec = load_accepted(paths.spec_file)
    except (RunspecError, OSError):
        return None
    if spec.push is None or spec.push.hub is None:
        return None
    repo, name = spec.push.hub.repo, paths.name
    return (
        f"its pushes stay in hub {repo}; a new run named {name} does not push there (its "
        "preflight and first push refuse) unless its spec sets push.hub.reuse: true, "
        "or pushes to another push.hub.repo"
    )


def _end_still_due(layout: StateLayout, name: str) -> str | None:
    """A machine end the run armed outlives its record: said, as it will still be applied."""
    from runspec.machine.machinefile import load_pending

    pending = load_pending(layout)
    if pending is None or pending.run != name or pending.step == "applied":
        return None
    return (
        f"the machine's end it armed ({pending.finish.action.value}) is still due: it is "
        "applied once no run is driven or queued"
    )


def _rm_rejected(args: argparse.Namespace, state: Path) -> Outcome:
    """`runspec rm FILE` of an inbox entry that was rejected: FILE and its .error go."""
    from runspec.errors import UsageError
    from runspec.printable import printable

    inbox = daemon_inbox(args.inbox, state)
    name = args.name
    if "/" in name:  # a path, as status shows it: only one right inside rejected/ is taken
        path, folder = Path(name).absolute(), rejected_dir(inbox)
        if not _same_folder(path.parent, folder):
            raise UsageError(
                f"{name!r} is not a run's name, nor in the inbox's rejected folder {folder}: rm "
                "takes a run's name, or a rejected spec's path as `runspec status` shows it"
            )
        name = path.name.removesuffix(ERROR_SUFFIX)
    found = rejected_entry(inbox, name)
    if not found:
        raise UsageError(
            f"no such run: {args.name!r} in {state}, nor a rejected inbox entry of that name"
        )
    clear(found)
    removed = [str(p) for p in found]
    if args.format == "json":
        print_json({"removed": removed, "kept": [], "name": name})
    else:
        print(printable(f"removed the rejected inbox entry {name}: {', '.join(removed)}"))
    return Outcome.OK


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _unsafe_left(paths: RunPaths, *, force: bool) -> tuple[str, list[str]] | None:
    """Refuse (or, forced, bury) a run whose run folder stays with unverified weights in it."""
    from runspec.errors import RunspecError, UsageError
    from runspec.machine.verdict import demanded, files_safety
    from runspec.spec.loader import load_accepted
    from runspec.spec.model import DEFAULT_PUSH_FILES
    from runspec.store.hint import command
    from runspec.store.tombstone import local_files

    try:
        spec = load_accepted(paths.spec_file)
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
        raise UsageError(
            f"run {paths.name!r} is not retired: {why}. Its record is what keeps this machine "
            f"from being destroyed under {len(files)} files in {paths.run_dir}; push them first "
            f"(`{command(f'push {paths.name}', paths.state)}`), or `--run-folder` to delete "
            "them, or `--force` to retire it and "
            "leave a tombstone that still keeps the machine from being destroyed"
        )
    return why, rels


def _bury(
    layout: StateLayout, name: str, run_dir: Path, aside: Path, rels: list[str], why: str
) -> Path | None:
    from runspec.store.tombstone import bury, local_files

    files = local_files(run_dir, rels)
    if not files:
        return None
    moved = {str(aside / Path(p).relative_to(run_dir.absolute())): st for p, st in files.items()}
    return bury(layout, name, aside, moved, why)
