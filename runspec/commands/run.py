"""`runspec run SPEC`: the whole lifecycle in the foreground, no daemon."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType

from runspec.commands import add_format, add_state, print_json, state_dir
from runspec.errors import Outcome


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", type=Path, help="the run spec (YAML)")
    add_state(parser)
    add_format(parser)
    parser.add_argument(
        "--finish-dry-run",
        action="store_true",
        help="print the finish action instead of doing it",
    )


def run(args: argparse.Namespace) -> Outcome:
    from runspec.daemon import perms
    from runspec.machine.leftarmed import left_armed
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
        git = git_info(args.spec)
        source = {"via": "runspec run", "source_path": str(args.spec.absolute())}
        accept(spec, state, {**source, **({"git": git} if git else {})})
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
    if (armed := left_armed(paths)) is not None:
        progress(armed)  # it outlives this command: say what it will do, and how to stop it
    if as_json:
        print_json(record.to_json())
    else:
        for line in summary_lines(spec, paths, record):
            progress(line)
    return run_outcome(run_safety(paths, spec, record), record)
