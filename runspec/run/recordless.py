"""A push target that lost `runspec/record.json` but still holds this run's manifest and weights.

One rule for people and engines (issue 35): such a target never yields a fresh start, which
would train from epoch 1 with a new budget and push its early weights over the verified newest
ones. The run goes on from the newest verified checkpoint its manifest lists, with a record
rebuilt from the manifest: the epoch it reached, its verified push, and a budget whose start is
unknown. That start is taken as the oldest time the manifest shows (its first verified push):
the run began before it, so the budget counted from there is never more than what is truly
left by more than the run's first minutes (its preflight, staging and epochs before the first
push), and the line that says the budget says so. Weights without this spec's copy beside them
are refused (exit 2): nothing can vouch they are this spec's.
"""

from __future__ import annotations

import hashlib

from runspec.clock import SYSTEM, Clock, parse_utc_iso, utc_iso
from runspec.errors import UsageError
from runspec.printable import printable
from runspec.push.fetch import Pushed
from runspec.push.hubrecord import newest_checkpoint
from runspec.push.remote import RECORD, SPEC
from runspec.spec.model import Spec
from runspec.store.state import PushRecord, RunRecord, RunStatus, Termination, move

LOST = f"{RECORD} is gone from its push target: rebuilt from the manifest"


def holds_weights(spec: Spec, pushed: Pushed) -> bool:
    """Whether the target's manifest names this run and lists a checkpoint (with or without
    a record beside it): then a fresh start would overwrite verified weights."""
    manifest = pushed.manifest
    return (
        manifest is not None
        and manifest.run == spec.name
        and newest_checkpoint(manifest.entries) is not None
    )


def rebuilt_record(
    spec: Spec, pushed: Pushed, refusal: type[UsageError], clock: Clock = SYSTEM
) -> RunRecord | None:
    """The run's record from its target's manifest, when the record is gone and the manifest
    holds this run's weights; None when it holds none (nothing to lose there). Raises
    `refusal` when the weights cannot be vouched for as this spec's."""
    manifest = pushed.manifest
    if pushed.record is not None or manifest is None or not holds_weights(spec, pushed):
        return None
    copy = manifest.by_path().get(SPEC)
    ours = {spec.sha256, hashlib.sha256(spec.text.encode()).hexdigest()}
    if copy is None or copy.sha256 not in ours:
        raise refusal(
            f"{pushed.where} holds weights of a run named {spec.name!r} but no runspec record, "
            f"and its {SPEC} is not this spec: nothing vouches they are this run's. "
            "Resume it with the spec it ran, or push to another repo (or folder) to start over"
        )
    checkpoint = newest_checkpoint(manifest.entries)
    assert checkpoint is not None  # holds_weights
    epoch = max(_count(manifest.epoch), _count(checkpoint.epoch))
    if manifest.final and epoch >= spec.train.epochs:
        raise refusal(f"run {spec.name!r} completed all its epochs: nothing to resume")
    now = clock.time()
    start = min([_time(e.time) for e in manifest.entries] + [_time(manifest.time), now])
    record = RunRecord(
        name=spec.name,
        spec_sha256=spec.sha256,
        started_at=utc_iso(start),
        budget_started_at=utc_iso(start),
        epoch=epoch,
        total_epochs=spec.train.epochs,
        last_push=PushRecord(
            epoch=epoch,
            time=manifest.time,
            commit=pushed.commit,
            files=[e.path for e in manifest.entries],
            final=manifest.final,
        ),
    )
    move(record, RunStatus.FINISHED, LOST, now, Termination.INTERRUPTED)
    return record


def unknown_start_line(record: RunRecord, where: str, keep_budget: bool) -> str:
    """What the budget line adds for a rebuilt record: its start is not known."""
    gone = f"{RECORD} is gone from {where}: rebuilt from its manifest (epoch "
    if not keep_budget:
        return gone + f"{record.epoch})"
    start = printable(str(record.budget_started_at))
    return gone + (
        f"{record.epoch}); the budget's start is unknown: counted from {start}, the oldest "
        "verified push there (the run began before it)"
    )


def _time(text: str) -> float:
    try:
        return parse_utc_iso(text)
    except (TypeError, ValueError):
        return float("inf")  # an unreadable time is no evidence of an earlier start


def _count(value: object) -> int:
    """An epoch from the target's manifest (outside data): a plain non-negative int, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
