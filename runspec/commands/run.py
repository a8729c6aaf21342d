"""`runspec run SPEC`: the whole lifecycle in the foreground, no daemon."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from runspec.commands import add_format, add_state, print_json, state_dir
from runspec.errors import Outcome

if TYPE_CHECKING:
    from runspec.engines.nodes import NodeLayout
    from runspec.engines.onbox import EngineContext, GraceWatch
    from runspec.run.attemptgate import AttemptGate
    from runspec.run.lifecycle import Lifecycle
    from runspec.spec.model import Spec
    from runspec.store.paths import RunPaths


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
        "--engine",
        choices=("skypilot", "dstack", "hf-jobs"),
        default=None,
        help="run under this engine, which owns the machine: no provider call, no finish "
        "action, exit 75 for a fresh machine (default: recognised from SKYPILOT_TASK_ID, "
        "DSTACK_RUN_ID or RUNSPEC_ENGINE)",
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


def _resume(
    args: argparse.Namespace,
    spec: Spec,
    state: Path,
    engine: EngineContext | None,
    gate: AttemptGate | None = None,
) -> str | None:
    """With --resume, or under an engine after an earlier attempt, the run reopened (the
    caller holds its lock); what to say of it."""
    from runspec.errors import UsageError
    from runspec.run.resume import resume_run, resume_under_engine, resuming_line

    if args.keep_budget and not args.resume:
        raise UsageError("--keep-budget goes with --resume")
    if engine is not None and not args.resume:
        if gate is not None:  # the attempt ledger's budget, from scratch when nothing was pushed
            done = gate.resume(state, engine.title)
        else:
            done = resume_under_engine(spec, state, engine.title)
        if done is None:
            return None
    elif not args.resume:
        return None
    else:
        done = resume_run(spec, state, keep_budget=args.keep_budget, via="runspec run --resume")
    where = done.checkpoint.name if done.checkpoint is not None else "its preflight"
    return f"{resuming_line(where, done.source, done.commit)}; {done.budget_line}"


def run(args: argparse.Namespace) -> Outcome:
    from runspec.daemon import perms
    from runspec.engines.onbox import detect, engine_outcome
    from runspec.machine.leftarmed import left_armed
    from runspec.machine.verdict import run_outcome, run_safety
    from runspec.machineowner import RUNSPEC
    from runspec.run.accept import accept
    from runspec.run.beside import refuse_beside_daemon
    from runspec.run.driver import build_run
    from runspec.run.finalsignals import after_stop_signal
    from runspec.spec.loader import load_spec
    from runspec.spec.provenance import git_info
    from runspec.store.owner import RunLock
    from runspec.store.paths import RunPaths
    from runspec.store.state import RecordStore
    from runspec.views.report import summary_lines
    from runspec.voice import Stream, set_live, setup_logging, tagged, warning
    from runspec.watch.renew import FIRST_LEASE_WAIT_S

    state = state_dir(args)
    perms.check([state])  # before a file is written through a link planted there
    engine = detect(os.environ, args.engine)
    spec = load_spec(args.spec, state)
    layout = node_plan(spec, engine)
    if layout is not None and layout.nnodes > 1:
        _secure_rendezvous(spec.name, engine)
    refuse_beside_daemon(spec, state, args.spec, resume=args.resume)
    paths = RunPaths.for_spec(spec, state)
    if layout is not None and not layout.head:
        task = engine.task_id if engine is not None else None
        return follow_node(spec, paths, layout, args, engine is not None or args.resume, task)
    # One owner per run: refused at once, naming the other driver, before anything is written.
    lock = RunLock(paths)
    lock.acquire()
    try:
        gate = _attempt_gate(args, spec, state, engine)  # before anything slow: the ledger
        if gate is not None and gate.early is not None:
            return gate.early
        resumed = _resume(args, spec, state, engine, gate)
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

        if layout is not None:
            from runspec.engines.nodes import unfitted
            from runspec.trainer.multinode import NODES_ENV

            progress(f"node 0 of {layout.nnodes}: owns the budget, the pushes and the verdict")
            os.environ[NODES_ENV] = " ".join(layout.torchrun_args())  # read by the trainer
            spec, not_fitted = unfitted(spec)
            if not_fitted is not None:
                progress(not_fitted)
        owner = RUNSPEC if engine is None else engine.owner()
        if engine is not None:
            progress(engine.line(spec.finish))  # said once, before the driver drops the finish
        drive = build_run(
            spec,
            paths,
            RecordStore(state),
            owner=owner,
            progress=progress,
            lock=lock,
            finish_dry_run=args.finish_dry_run,
        )
        lifecycle, spec = drive.lifecycle, drive.spec
        watch = None if engine is None else engine_watch(engine, lifecycle, progress)
        if resumed is not None:
            lifecycle.say(resumed)

        def on_signal(signum: int, frame: FrameType | None) -> None:
            lifecycle.requests.interrupt()  # sets a flag; a second signal sets the abort flag
            if watch is not None:
                watch.start()  # the engine's SIGKILL comes at the end of its grace

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        # The off-box dead-man's switch: this run vouches for itself on the Hub while it lives.
        drive.start()  # the lease's first renewal makes the repo: watched before anything slow
        renewer = drive.renewer
        wait = min(renewer.interval, FIRST_LEASE_WAIT_S) if renewer is not None else 0.0
        # A run its repo refuses gets no lease there: its renewer said why, once.
        if renewer is not None and not renewer.first(wait) and renewer.refused is None:
            progress(warning(f"no lease in {renewer.repo} yet: tried again meanwhile"))
        try:
            record = lifecycle.run()
        finally:
            if watch is not None:
                watch.cancel()
            drive.close()
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
    if engine is not None:
        outcome = engine_outcome(record, run_safety(paths, spec, record))
        signalled = lifecycle.requests.interrupted.is_set()
        outcome = after_stop_signal(outcome, record, signalled)
        return outcome if gate is None else gate.close(record, outcome, signalled)
    outcome = run_outcome(run_safety(paths, spec, record), record)
    if outcome is Outcome.FAILED and lifecycle.requests.aborted.is_set():
        return Outcome.INTERRUPTED  # a second signal gave the run up: 130, as a shell says
    return outcome


def _attempt_gate(
    args: argparse.Namespace, spec: Spec, state: Path, engine: EngineContext | None
) -> AttemptGate | None:
    """Under an engine (not a person's --resume): this attempt in the run's ledger at its push
    target, read and written before the preflight (runspec.run.attemptgate)."""
    if engine is None or args.resume:
        return None
    from runspec.push.remote import GATED_TASK
    from runspec.run.attemptgate import open_attempt
    from runspec.voice import tagged

    stream = sys.stderr if args.format == "json" else sys.stdout

    def say(text: str) -> None:
        for line in tagged(spec.name, text):
            print(line, file=stream, flush=True)

    gate = open_attempt(spec, state, engine.title, engine.task_id, say)
    if gate is not None and gate.attempt is not None:  # admitted: the ledger names this run
        os.environ[GATED_TASK] = engine.task_id or ""
    return gate


def engine_watch(
    engine: EngineContext, lifecycle: Lifecycle, say: Callable[[str], None]
) -> GraceWatch:
    """Under an engine, its stop signal ends the trainer at once (its newest checkpoint is
    pushed first: runspec.run.driver sets that for an engine's run), and the process exits
    before the engine's grace is over, however far the final push got: with 75 when every
    weight is verified at the target, else 3."""
    from runspec.engines.onbox import GraceWatch, engine_outcome, hard_exit
    from runspec.errors import EXIT_CODES
    from runspec.machine.verdict import run_safety
    from runspec.run.finalsignals import after_stop_signal
    from runspec.trainer.launcher import TrainerHandle
    from runspec.voice import warning

    def expire() -> None:
        say(warning(f"{engine.title}'s grace is nearly over: exiting before its SIGKILL"))
        handle = TrainerHandle.find(lifecycle.paths)
        if handle is not None and handle.alive():
            handle.kill_now()
        record = lifecycle.record
        outcome = engine_outcome(record, run_safety(lifecycle.paths, lifecycle.spec, record))
        outcome = after_stop_signal(outcome, record, signalled=True)
        say(f"exit {EXIT_CODES[outcome]} ({outcome.value})")
        hard_exit(EXIT_CODES[outcome])

    return GraceWatch(engine.grace, expire)


def node_plan(spec: Spec, engine: EngineContext | None) -> NodeLayout | None:
    """This node's place in a run across nodes; None for a run on one node. Checked before
    anything is written."""
    from runspec.engines.nodes import node_layout

    nodes = spec.resources.nodes
    if engine is None and nodes <= 1:
        return None  # a single box: no engine's variables, nor MASTER_PORT, are read
    layout = node_layout(
        os.environ,
        engine.engine if engine is not None else None,
        cpu=spec.train.device == "cpu",
        spec_nodes=nodes,
    )
    return layout if layout.nnodes > 1 else None


def follow_node(
    spec: Spec,
    paths: RunPaths,
    layout: NodeLayout,
    args: argparse.Namespace,
    resume: bool,
    task_id: str | None = None,
) -> Outcome:
    """Node 1 and up: stage, follow torchrun, exit with it (runspec.run.follower); `resume`:
    from where an earlier attempt left the run, as node 0 does."""
    from runspec.run.follower import follow
    from runspec.store.owner import RunLock
    from runspec.voice import Stream, setup_logging, tagged

    stream = Stream(sys.stderr if args.format == "json" else sys.stdout)
    setup_logging(stream, args.verbose)

    def say(text: str) -> None:
        for line in tagged(spec.name, text):
            stream(line)

    say(
        f"node {layout.node_rank} of {layout.nnodes}: following node 0 at "
        f"{layout.master_addr}:{layout.master_port}, which owns the budget, the pushes and "
        "the verdict; nothing is pushed from this node"
    )
    lock = RunLock(paths)
    lock.acquire()
    try:
        outcome = follow(spec, paths, layout.torchrun_args(), say, resume, args.resume, task_id)
    finally:
        lock.release()
    if args.format == "json":
        print_json({"name": spec.name, "node_rank": layout.node_rank, "outcome": outcome.value})
    return outcome


def _secure_rendezvous(name: str, engine: EngineContext | None) -> None:
    """Every node's torchrun joins the run under an id only the run's nodes can name
    (runspec.engines.nodes.rendezvous_id), handed to the trainer in its environment."""
    from runspec.engines.nodes import SECRET_ENV, rendezvous_id
    from runspec.trainer.multinode import RDZV_ID_ENV
    from runspec.voice import warning

    found = rendezvous_id(os.environ, engine.task_id if engine else None, name)
    if found is not None:
        os.environ[RDZV_ID_ENV] = found
        return
    print(
        warning(
            "no HF_TOKEN or RUNSPEC_RENDEZVOUS_SECRET on this node: the nodes' rendezvous is "
            f"open to whoever reaches node 0's port; set {SECRET_ENV} (the same on every node)"
        ),
        file=sys.stderr,
    )
