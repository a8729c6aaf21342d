"""`runspec push NAME`: push and verify what a finished run left unverified.

A Hub outage through the final push, or a wrong token fixed since, leaves a finished run whose
weights exist only on this disk (`pushed: NOTHING VERIFIED`, exit 3). This sends what the run's
final push would have sent (its weights, logs and record, then its card), verifies it as a final
push does (read-back included where the spec asks for it), and says what it verified. It
applies no finish unless asked (`--finish`): then the run goes back to its finish and the
machine's end judges it by the same gate as at a run's own end (the verdict on every run's
files), never a looser one. Exit 0 when verified, 3 when still not (no finish is applied
then), 2 for a run that is not there, not finished or driven by someone else.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from runspec.commands import add_format, add_name, add_state, print_json, state_dir
from runspec.errors import Outcome

if TYPE_CHECKING:
    from runspec.spec.model import Spec
    from runspec.store.owner import RunOwner
    from runspec.store.paths import RunPaths

PUSH_TIMEOUT_S = 600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_name(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=PUSH_TIMEOUT_S,
        help="seconds to keep trying before giving up (default 600)",
    )
    parser.add_argument(
        "--finish",
        action="store_true",
        help="then apply the spec's finish, through the same gate as a run's own end",
    )
    add_state(parser)
    add_format(parser)


def _finish(spec: Spec, paths: RunPaths, owner: RunOwner, say: Callable[[str], None]) -> None:
    from runspec.machine.endgame import Endgame
    from runspec.run.resume import refinish

    refinish(owner.record, owner.store)
    Endgame(paths.layout, say=say).finish_run(spec, paths, owner)


def _no_finish(paths: RunPaths) -> str:
    """What follows a push without --finish: nothing from this command, but a machine end
    armed before (a deferred finish that waited for these weights) is then applied by
    whoever enters the machine's end next: said, never "the machine stays" over it."""
    from runspec.machine.machinefile import load_pending
    from runspec.store.owner import daemon_holder

    pending = load_pending(paths.layout)
    if pending is None or pending.step == "applied":
        return "no finish applied (the machine stays)"
    daemon = daemon_holder(paths.layout)
    by = f"the daemon ({daemon}) applies it" if daemon else "the next daemon applies it"
    return (
        f"no finish applied by this command, but the machine's end armed for {pending.run} "
        f"(finish.action {pending.finish.action.value}) is still due: {by} once no run is "
        "driven or queued, judged on the weights now verified"
    )


def _said(owner: RunOwner) -> str:
    finish = owner.record.finish
    return finish.summary if finish is not None and finish.summary else owner.record.reason


def run(args: argparse.Namespace) -> Outcome:
    from runspec.clock import SYSTEM
    from runspec.errors import UsageError
    from runspec.push import Pusher
    from runspec.push.cardpush import push_card
    from runspec.push.report import prepare
    from runspec.push.until import push_until_verified
    from runspec.spec.loader import load_accepted
    from runspec.store.hint import command
    from runspec.store.owner import RunLock, RunOwner
    from runspec.store.paths import StateLayout
    from runspec.store.state import RecordStore, RunStatus
    from runspec.timers import Timers
    from runspec.voice import error

    state = state_dir(args)
    store = RecordStore(state)
    record = store.load(args.name)  # a damaged record raises, saying so
    if record is None:
        raise UsageError(f"no run named {args.name!r} in {state}")
    paths = StateLayout(state).run_paths(args.name)
    lock = RunLock(paths)
    lock.acquire()  # refused, naming the driver, while anyone drives it
    try:
        record = store.load(args.name) or record
        if record.status is not RunStatus.FINISHED:
            raise UsageError(
                f"run {args.name!r} is still {record.status.value}: whoever drives it pushes it; "
                f"a run nobody drives goes on with `{command('run SPEC --resume', state)}`"
            )
        spec = load_accepted(paths.spec_file)
        if spec.push is None:
            raise UsageError(f"run {args.name!r} pushes nowhere (its spec has no push section)")
        as_json = args.format == "json"
        say = (lambda line: None) if as_json else print
        owner = RunOwner(store, record)
        pusher = Pusher(spec, paths, owner, progress=say, min_interval=0.0, timers=Timers(SYSTEM))
        pusher.start()
        try:
            say(f"pushing {args.name} to {pusher.target.description}")
            pushed = push_until_verified(pusher, final=True, timeout=args.timeout, clock=SYSTEM)
        finally:
            pusher.stop()
        if pushed is not None:
            prepare(spec, paths, owner.record, say)
            push_card(pusher.target, paths, say, args.timeout)
        if pushed is not None and args.finish:
            _finish(spec, paths, owner, say)
    finally:
        lock.release()
    if as_json:
        print_json(
            {
                "name": args.name,
                "verified": pushed is not None,
                "push": None if pushed is None else vars(pushed),
                "error": owner.record.push_error if pushed is None else None,
                "then": None if pushed is None else _said(owner) if args.finish else None,
                "machine_end": None if pushed is None or args.finish else _no_finish(paths),
            }
        )
    elif pushed is not None:
        at = f" at commit {pushed.commit[:10]}" if pushed.commit else ""
        print(
            f"verified: epoch {pushed.epoch}, {len(pushed.files)} files at "
            f"{pusher.target.description}{at}; "
            + (f"finish: {_said(owner)}" if args.finish else _no_finish(paths))
        )
    else:
        print(error(f"NOT verified: {owner.record.push_error or 'the push did not verify'}"))
    return Outcome.OK if pushed is not None else Outcome.UNVERIFIED
