"""`runspec logs NAME`: the run's story as one stream: runspec's own lines and the training's
output (a crash's traceback included), in time order, like `journalctl` or `docker logs`.

-n N shows the last N lines; -f follows the run until it ends, from its preflight and staging
on (runspec's lines) through training.
"""

from __future__ import annotations

import argparse
import sys

from runspec.commands import add_format, add_name, add_state, state_dir
from runspec.errors import Outcome

FOLLOW_POLL = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_name(parser)
    parser.add_argument("-f", "--follow", action="store_true", help="follow until the run ends")
    parser.add_argument(
        "-n", "--lines", type=int, default=None, metavar="N", help="only the last N lines"
    )
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--runspec", action="store_true", help="only runspec's own lines")
    only.add_argument("--training", action="store_true", help="only the training's output")
    add_state(parser)
    add_format(parser)  # json: one object per line (time, source, text)


def run(args: argparse.Namespace) -> Outcome:
    from runspec.clock import SYSTEM
    from runspec.errors import UsageError
    from runspec.printable import printable, printable_lines
    from runspec.store.paths import StateLayout
    from runspec.store.state import RecordStore, RunStatus
    from runspec.views.finished import finished_summary
    from runspec.views.logstream import Entry, log_files, read_all

    if args.lines is not None and args.lines < 0:
        raise UsageError(f"-n takes a number of lines, 0 or more, not {args.lines}")
    state = state_dir(args)
    store = RecordStore(state)
    if store.load(args.name) is None:
        raise UsageError(f"no run named {args.name!r} in {state}")
    paths = StateLayout(state).run_paths(args.name)
    files = log_files(paths, runspec=not args.training, training=not args.runspec)

    def show(entries: list[Entry]) -> None:
        for entry in entries:
            # Log lines quote spec values and whatever the trainer printed: shown, never acted
            # on by a terminal.
            text = entry.to_json() if args.format == "json" else printable(entry.render())
            sys.stdout.write(text + "\n")
        sys.stdout.flush()

    record = store.load(args.name)
    ended = record is None or record.status is RunStatus.FINISHED
    first = read_all(files, final=ended or not args.follow)
    # The story ends with what the run came to (not with -n 0, in JSON or for the training's
    # lines alone); -n N is the last N lines of that whole story, the summary's included.
    summary = finished_summary(state, args.name) if args.lines != 0 else None
    if summary is None or args.format == "json" or args.training:
        summary = []
    if args.lines is not None:
        summary = summary[max(0, len(summary) - args.lines) :]
        keep = args.lines - len(summary)
        first = first[max(0, len(first) - keep) :] if keep > 0 else []
    show(first)
    while args.follow and not ended:
        SYSTEM.sleep(FOLLOW_POLL)
        record = store.load(args.name)
        ended = record is None or record.status is RunStatus.FINISHED
        # Read once more after the end, so the tail is never lost. The training's output
        # appears only once training starts: a missing file is simply empty until then.
        show(read_all(files, final=ended))
    if args.follow and summary == [] and args.lines != 0:  # it ended while followed
        summary = finished_summary(state, args.name) or []
        summary = [] if args.format == "json" or args.training else summary
    if summary:
        sys.stdout.write(printable_lines("\n".join(summary)) + "\n")
    return Outcome.OK
