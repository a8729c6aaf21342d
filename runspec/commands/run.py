"""`runspec run SPEC`: the whole lifecycle in the foreground, no daemon."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from runspec.commands import add_format, add_state, print_json, state_dir
from runspec.errors import Outcome

if TYPE_CHECKING:
    from runspec.spec.model import Spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", type=Path, help="the run spec (YAML)")
    add_state(parser)
    add_format(parser)
    parser.add_argument(
        "--finish-dry-run",
        action="store_true",
        help="print the finish action instead of doing it",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue a stopped run from its newest intact checkpoint (here, or on a fresh "
        "disk the verified one at its push target), with a new budget of its wall_clock",
    )
    parser.add_argument(
        "--keep-budget",
        action="store_true",
        help="with --resume: keep only what is left of the budget, counted from its start",
    )


def _resume(args: argparse.Namespace, spec: Spec, state: Path) -> str | None:
    """With --resume, the run reopened (the caller holds its lock); what to say of it."""
    from runspec.errors import UsageError
    from runspec.run.resume import resume_run

    if args.keep_budget and not args.resume:
        raise UsageError("--keep-budget goes with --resume")
    if not args.resume:
        return None
    done = resume_run(spec, state, keep_budget=args.keep_budget, via="runspec run --resume")
    where = done.checkpoint.name if done.checkpoint is not None else "its preflight"
    return f"resuming from {where} ({done.source}); {done.budget_line}"


def run(args: argparse.Namespace) -> Outcome:
    from runspec.daemon import perms
    from runspec.machine.verdict import run_outcome, run_safety
    from runspec.run.accept import accept
    from runspec.run.beside import refuse_beside_daemon
    from runspec.run.lifecycle import Lifecycle, LifecycleOptions
    from runspec.spec.loader import load_spec
    from runspec.spec.provenance import git_info
    from runspec.store.owner import RunLock
    from runspec.store.paths import RunPaths
    from runspec.store.state import RecordStore
    from runspec.views.report import summary_lines
    from runspec.voice import Stream, set_live, setup_logging, tagged

    state = state_dir(args)
    perms.check([state])  # before a file is written through a link planted there
    spec = load_spec(args.spec, state)
    refuse_beside_daemon(spec, state, args.spec)
    paths = RunPaths.for_spec(spec, state)
    # One owner per run: refused at once, naming the other driver, before anything is written.
    lock = RunLock(paths)
    lock.acquire()
    try:
        resumed = _resume(args, spec, state)
        git = git_info(args.spec)
        accept(spec, state, {"via": "runspec run", **({"git": git} if git else {})})
        paths = RunPaths.for_spec(spec, state)
        as_json = args.format == "json"
        # With --json, stdout holds only the final JSON; progress goes to stderr.
        stream = Stream(sys.stderr if as_json else sys.stdout)
        setup_logging(stream, args.verbose)
        set_live(stream.live)

        def progress(text: str) -> None:
            # Every line says which run it is about, as the daemon's do.
            for line in tagged(spec.name, text):
                stream(line)

        lifecycle = Lifecycle(
            spec,
            paths,
            RecordStore(state),
            LifecycleOptions(finish_dry_run=args.finish_dry_run, progress=progress),
            lock=lock,
        )
        if resumed is not None:
            lifecycle.say(resumed)

        def on_signal(signum: int, frame: FrameType | None) -> None:
            lifecycle.requests.interrupt()  # sets a flag; a second signal sets the abort flag

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            record = lifecycle.run()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    finally:
        lock.release()
    if as_json:
        print_json(record.to_json())
    else:
        for line in summary_lines(spec, paths, record):
            progress(line)
    return run_outcome(run_safety(paths, spec, record), record)
