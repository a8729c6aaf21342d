"""Where a follower (node 1 and up of a run across nodes) starts under an engine, read from the
attempt ledger node 0 writes (issue 36: one rule for every node, a follower joins a run
already under way). Nothing is written here.

Node 0's gate (runspec.run.attemptgate) decides its attempt's start before anything slow and
records it with where the target stood: the epoch it starts from (0: from scratch, as a new
task or a run with nothing verified yet starts), the newest verified epoch the target held,
whatever run's, and the commit it read. A follower follows that entry: from scratch where node
0 starts from scratch (never an older task's weights beside it), else from the checkpoint at
the commit node 0 read.

Both nodes start together, so a follower may read the ledger before node 0 wrote its entry.
The newest entry is node 0's only while it is open (no end written) and the target holds no
newer verified epoch than when node 0 read it; otherwise the follower reads the target as node
0's gate is about to read it (the head: node 0 pushes nothing before its entry is written).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runspec.clock import SYSTEM, Clock, parse_utc_iso
from runspec.errors import Outcome
from runspec.printable import printable
from runspec.push.fetch import Pushed, Source, read_pushed
from runspec.run.attemptgate import verified_epoch
from runspec.run.attempts import Attempt, Ledger, read_ledger
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths


@dataclass(frozen=True)
class Following:
    """What a follower does before anything is staged."""

    early: Outcome | None = None  # exit with it now, as node 0 does
    scratch: bool = False  # node 0 starts from scratch: so does this node
    # The target as node 0's attempt read it: resume from its newest verified checkpoint.
    # None: read the target's head (no ledger, or one written before it kept the commit).
    at: Pushed | None = None


def follower_verdict(
    spec: Spec,
    paths: RunPaths,
    task_id: str | None,
    say: Callable[[str], None],
    clock: Clock = SYSTEM,
) -> Following:
    """Node 0's decision for this attempt, as the ledger at the target's head says it. Raises
    PushFailed (the target cannot be read: this node cannot know where the run stands) and
    DamagedLedger."""
    if spec.push is None:
        return Following()
    head, source = read_pushed(spec, paths), Source.of(spec, paths)
    if head.commit is None and source.hub is not None:
        return Following()  # no repo yet: the first attempt
    source.commit = head.commit
    ledger = read_ledger(source)
    if ledger is None:
        return Following()
    ended = _ended(spec, ledger, task_id, say, clock)
    if ended is not None:
        return ended
    current = ledger.attempts[-1] if ledger.attempts else None
    if current is None or not _is_node_0s(current, head):
        return Following()  # node 0's gate has yet to read the head this node reads
    if current.verified_epoch == 0:
        say(f"attempt {current.n} starts from scratch on node 0: so does this node")
        return Following(scratch=True)
    at = head if current.commit in (None, head.commit) else read_pushed(spec, paths, current.commit)
    return Following(at=at)


def _is_node_0s(current: Attempt, head: Pushed) -> bool:
    """Whether the newest entry is node 0's attempt now (see the module's words)."""
    if current.target_epoch is None:
        return False  # a ledger from before it kept where the target stood: read the head
    return current.ended_at is None and verified_epoch(head) == current.target_epoch


def _ended(
    spec: Spec, ledger: Ledger, task_id: str | None, say: Callable[[str], None], clock: Clock
) -> Following | None:
    """A new task (from scratch), a run ended for good or past its budget (exit now)."""
    if task_id is not None and ledger.task_id not in (None, task_id):
        say(f"task {printable(task_id)} is new: a new run, from scratch, as node 0 starts it")
        return Following(scratch=True)
    if ledger.terminal is not None:
        code = ledger.terminal["exit"]
        why = printable(str(ledger.terminal["reason"]))
        say(f"run {spec.name!r} ended for good ({why}): exit {code}, as node 0 exits")
        return Following(early=Outcome.OK if code == 0 else Outcome.INVALID)
    if clock.time() >= parse_utc_iso(ledger.budget_started_at) + spec.budget.wall_clock:
        say("the budget is spent: nothing more is trained: exit 0, as node 0 exits")
        return Following(early=Outcome.OK)
    return None
