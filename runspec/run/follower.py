"""`runspec run` on a node other than node 0 of a run across nodes: it follows torchrun.

Node 0's runspec owns the run: its budget, its pushes, its record and its verdict. Here,
on node 1 and up, runspec stages the dataset (LibreYOLO reads the dataset on every rank), starts
the same trainer with torchrun's node options, and exits with it: 0 when training ended well
or node 0 stopped it on purpose (the trainer heard it through the rendezvous store), 75 (a
fresh machine) when a peer died or the nodes never met, 2 when the dataset cannot be staged.
Nothing is pushed from here and no record is written to the Hub; no finish action is taken.
A stop signal from the engine ends the trainer (and torchrun's ranks) at once.

A fresh attempt of a task (an engine's recovery) reads the run's record at its push target as
node 0 does, before anything is staged: a task marked terminal ends here at once (exit 2); an
earlier attempt's newest verified checkpoint is downloaded at the commit of the record read and
checked against the pushed manifest, and this node's ranks resume from it with node 0's
schedule, so every rank goes on at the same epoch from the same file (LibreYOLO loads it on
each rank). A target that cannot be read asks for a fresh machine: this node cannot know where
the run stands, and must not train it from scratch beside a node 0 that resumes it.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from runspec.budgetfit import planned_epochs
from runspec.dataset.staging import stage_dataset
from runspec.errors import Outcome, RunspecError
from runspec.push.base import PushFailed
from runspec.push.fetch import Pushed, read_pushed
from runspec.run.followstart import Following, follower_verdict
from runspec.run.recordless import holds_weights
from runspec.run.resume import fetch_checkpoint, no_checkpoint, remote_record, resuming_line
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths
from runspec.trainer.control import TrainerOutcome, TrainJob
from runspec.trainer.launcher import start
from runspec.trainer.multinode import NODES_ENV
from runspec.voice import error

POLL = 0.5


@dataclass(frozen=True)
class Start:
    """Where this node's ranks start: from scratch, or node 0's checkpoint and schedule."""

    checkpoint: Path | None = None
    epochs: int | None = None  # None: the spec's


def resume_point(
    spec: Spec,
    paths: RunPaths,
    asked: bool,
    say: Callable[[str], None],
    at: Pushed | None = None,
) -> Start:
    """An earlier attempt's start, read from the push target as node 0 reads it (`asked`: a
    --resume, which must find one; `at`: the target as node 0's attempt read it, else its
    head). Raises CannotResume (a task marked terminal, another run's target: exit 2) and
    PushFailed (a target that cannot be read)."""
    if spec.push is None:
        return Start()
    pushed = at or read_pushed(spec, paths)
    if pushed.record is None and not asked and not holds_weights(spec, pushed):
        return Start()  # the first attempt (a target with the run's weights resumes, as node 0)
    remote = remote_record(spec, pushed, paths.state)
    epochs = planned_epochs(spec, remote)  # node 0 keeps the schedule its record holds
    checkpoint = fetch_checkpoint(spec, paths, pushed.manifest, pushed.commit)
    if checkpoint is None and asked:
        raise no_checkpoint(spec, paths.state, pushed.where)  # as node 0: every node exits 2
    if checkpoint is None:  # an engine's attempt: from scratch with node 0 (attemptgate)
        say(f"no verified checkpoint at {pushed.where}: from scratch, as node 0 starts")
        return Start()
    say(f"{resuming_line(checkpoint.name, pushed.where, pushed.commit)}, as node 0 does")
    return Start(checkpoint, epochs)


def start_of(
    spec: Spec,
    paths: RunPaths,
    say: Callable[[str], None],
    resume: bool,
    asked: bool,
    task_id: str | None,
) -> Start | Outcome:
    """Where this node's ranks start, or the status to exit with before anything is staged
    (a run ended for good; 75 where the target cannot be read). Raises CannotResume."""
    try:
        node_0 = Following()
        if resume and not asked:
            node_0 = follower_verdict(spec, paths, task_id, say)
        if node_0.early is not None:
            return node_0.early
        if not resume or node_0.scratch:
            return Start()
        return resume_point(spec, paths, asked, say, node_0.at)
    except PushFailed as exc:
        say(error(f"cannot read where the run stands: {exc}: exit 75 (a fresh machine)"))
        return Outcome.RETRY


def follow(
    spec: Spec,
    paths: RunPaths,
    torchrun_args: list[str],
    say: Callable[[str], None],
    resume: bool = False,
    asked: bool = False,
    task_id: str | None = None,
) -> Outcome:
    """`resume`: under an engine, or asked (--resume): where the run stands is read first;
    under an engine the attempt ledger first (`task_id`: the engine's), as node 0 reads it."""
    begin = start_of(spec, paths, say, resume, asked, task_id)
    if isinstance(begin, Outcome):
        return begin
    try:
        data_yaml = stage_dataset(spec, paths, progress=say)
    except RunspecError as exc:
        say(error(f"staging failed: {exc}"))
        return Outcome.INVALID
    os.environ[NODES_ENV] = " ".join(torchrun_args)
    job = TrainJob.from_spec(spec, paths, data_yaml, begin.checkpoint, begin.epochs)
    handle = start(job, paths, log_line=say)
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
