"""`runspec run` on a node other than node 0 of a run across nodes: it follows torchrun.

Node 0's runspec owns the run: its budget, its pushes, its record and its verdict. Here,
on node 1 and up, runspec stages the dataset (LibreYOLO reads the dataset on every rank), starts
the same trainer with torchrun's node options, and exits with it: 0 when training ended well
or node 0 stopped it on purpose (the trainer heard it through the rendezvous store), 75 (a
fresh machine) when a peer died or the nodes never met, 2 when the dataset cannot be staged.
Nothing is pushed from here and no record is written to the Hub; no finish action is taken.
A stop signal from the engine ends the trainer (and torchrun's ranks) at once.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

from runspec.dataset.staging import stage_dataset
from runspec.errors import Outcome, RunspecError
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths
from runspec.trainer.control import TrainerOutcome, TrainJob
from runspec.trainer.launcher import start
from runspec.trainer.multinode import NODES_ENV
from runspec.voice import error

POLL = 0.5


def follow(
    spec: Spec, paths: RunPaths, torchrun_args: list[str], say: Callable[[str], None]
) -> Outcome:
    try:
        data_yaml = stage_dataset(spec, paths, progress=say)
    except RunspecError as exc:
        say(error(f"staging failed: {exc}"))
        return Outcome.INVALID
    os.environ[NODES_ENV] = " ".join(torchrun_args)
    handle = start(TrainJob.from_spec(spec, paths, data_yaml), paths, log_line=say)
    stopped = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while handle.alive():
            if stopped.wait(POLL):
                say("stop signal: ending this node's ranks")
                handle.kill_now()
                return Outcome.RETRY
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    result = handle.result()
    outcome = result.outcome if result is not None else TrainerOutcome.KILLED
    why = (result.detail or result.reason) if result is not None else ""
    if outcome in (TrainerOutcome.COMPLETED, TrainerOutcome.STOPPED):
        say(f"training ended on every node ({outcome.value}{': ' + why if why else ''})")
        return Outcome.OK
    say(error(f"this node's training ended: {why or outcome.value}: exit 75 (a fresh machine)"))
    return Outcome.RETRY
