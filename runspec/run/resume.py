"""`--resume`: a stopped run goes on from its newest intact checkpoint, with its record.

A run ended by Ctrl-C, a cancel, a budget stop or a trainer that died, or left half-way by a
driver that was killed, is reopened here before its lifecycle is entered again: its record
moves back to training (or, on a disk without its dataset, to the preflight and the staging),
its old trainer's leftovers are cleared, and the supervisor starts a trainer from the newest
intact checkpoint, which LibreYOLO continues at the epoch after it.

On a fresh disk (a new state folder and run folder: another machine, an engine's recovery) the
run is read from its push target: the record there must name this run and this spec; the
newest checkpoint its manifest lists is downloaded and checked against the manifest's sha256;
the manifest becomes the run's verified push history, and the record its history and budget.
The other nodes of a run across nodes read the same record and fetch the same checkpoint
through `remote_record` and `fetch_checkpoint` (runspec.run.follower), writing nothing here.

The budget: a person's explicit `--resume` gets the spec's wall clock again (said in one line).
`keep_budget` (an engine's retry, `--keep-budget`) keeps what is left of the budget counted from
the record's budget start, so a run that spans machines never gets a new one. A run marked
terminal (it failed for good: a missing dataset) is refused at once, as is a run with nothing
to resume from.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from runspec.clock import SYSTEM, Clock, human_duration, parse_utc_iso, utc_iso
from runspec.errors import UsageError
from runspec.printable import printable
from runspec.push.base import PushFailed
from runspec.push.fetch import Pushed, Source, read_pushed
from runspec.push.hubrecord import newest_checkpoint
from runspec.push.manifest import Manifest
from runspec.run.accept import accept
from runspec.run.recordless import holds_weights, rebuilt_record, unknown_start_line
from runspec.spec.model import Spec
from runspec.store.hint import command
from runspec.store.paths import RunPaths
from runspec.store.state import (
    UNFINISHED_END,
    DamagedRecord,
    RecordStore,
    Reopen,
    RunRecord,
    RunStatus,
    Termination,
    move,
)
from runspec.trainer import control
from runspec.trainer.checkpoints import newest_intact_checkpoint
from runspec.trainer.launcher import TrainerHandle

# What a pushed record may set in a fresh disk's record: its story and its budget, never where
# this machine keeps its files.
CARRIED = (
    "started_at",
    "budget_started_at",
    "deadline",
    "epoch",
    "total_epochs",
    "restarts_used",
    "last_push",
    "cost",
    "fit",
    "history",
    "resumes",
    "termination",
    "why",
    "terminal",
)


class CannotResume(UsageError):
    """Nothing to resume, or a run that must not be resumed: exit 2, saying why."""


class NothingToResume(CannotResume):
    """A run with no intact checkpoint anywhere: under an engine it starts over with the
    budget left (runspec.run.attemptgate)."""


@dataclass(frozen=True)
class Resumed:
    record: RunRecord
    checkpoint: Path | None  # None: a run that had not trained yet starts at its preflight
    source: str  # "this disk" or the target it came from
    budget_line: str
    commit: str | None = None  # the target's commit a downloaded checkpoint was read at


def resume_run(
    spec: Spec,
    state: Path,
    *,
    keep_budget: bool,
    via: str,
    clock: Clock = SYSTEM,
    runs: Path | None = None,
    data: Path | None = None,
    pushed: Pushed | None = None,
) -> Resumed:
    """Reopen the run named by `spec` (the caller holds its lock); raises CannotResume.
    `pushed`: what its target holds, when the caller has read it already."""

    store = RecordStore(state.absolute(), clock)
    rm = command(f"rm {spec.name}", state)
    try:
        record = store.load(spec.name)
    except DamagedRecord as exc:
        raise CannotResume(f"{exc}: `{rm}` it first") from exc
    # The commit the pushed manifest (here: pushed.json) was verified at, to fetch at it.
    target = None  # where the record came from, when not from this disk
    if record is None:
        record, pushed = _from_target(spec, state, via, clock, runs, data, pushed)
        source = target = pushed.where
        commit = pushed.commit
    else:
        source = "this disk"
        commit = record.last_push.commit if record.last_push is not None else None
        _refuse_unresumable(spec, record, state)
    paths = RunPaths.load(state.absolute(), spec.name)
    checkpoint = newest_intact_checkpoint(paths.run_dir)
    fetched_at = None
    if checkpoint is None and spec.push is not None:
        manifest = Manifest.load(paths.pushed_manifest)
        checkpoint = fetch_checkpoint(spec, paths, manifest, commit)
        source = source if checkpoint is None or source != "this disk" else "its push target"
        fetched_at = commit if checkpoint is not None else None
    if checkpoint is None and record.status is RunStatus.FINISHED:
        raise no_checkpoint(spec, state, target)
    lost = target is not None and pushed is not None and pushed.record is None
    said = unknown_start_line(record, source, keep_budget) if lost else ""
    line = _reopen(spec, paths, record, store, keep_budget, clock, source)
    line = f"{said}; {line}" if said else line
    return Resumed(record, checkpoint, source, line, fetched_at)


def _start_over(spec: Spec, state: Path, target: str | None) -> str:
    """How to run it again. `target`: where the record was read when it is not this disk's
    (an engine's fresh machine): the record stays there, so `runspec rm` would not clear it."""
    if target is None:
        return f"run it again under another name (or `{command(f'rm {spec.name}', state)}` first)"
    return f"launch it again under another name (its record stays at {target})"


def no_checkpoint(spec: Spec, state: Path, target: str | None) -> CannotResume:
    """An ended run with no checkpoint to go on from, here nor at its target (every node of a
    run across nodes refuses it alike)."""
    return NothingToResume(
        f"nothing to resume: run {spec.name!r} has no intact checkpoint on this disk nor at "
        f"its push target; {_start_over(spec, state, target)}"
    )


def resuming_line(checkpoint: str, source: str, commit: str | None) -> str:
    """What every node says of where it goes on from: the file, where, the commit read."""
    at = f", commit {printable(commit[:7])}" if commit else ""
    return f"resuming from {checkpoint} ({source}){at}"


def _refuse_unresumable(
    spec: Spec, record: RunRecord, state: Path, target: str | None = None
) -> None:
    """`target`: where the record was read, when it is not this disk's."""
    if record.spec_sha256 != spec.sha256:
        raise CannotResume(
            f"run {spec.name!r} was made from another spec (sha256 {record.spec_sha256[:12]}, "
            f"this one {spec.sha256[:12]}); resume it with the spec it ran"
        )
    if record.terminal:
        why = printable(record.terminal.reason)
        raise CannotResume(
            f"run {spec.name!r} failed for good and is not resumed: {why}; fix the spec, then "
            f"{_start_over(spec, state, target)}"
        )
    if record.status is RunStatus.FINISHED and record.termination is Termination.COMPLETED:
        raise CannotResume(f"run {spec.name!r} completed all its epochs: nothing to resume")


def _from_target(
    spec: Spec,
    state: Path,
    via: str,
    clock: Clock,
    runs: Path | None,
    data: Path | None,
    pushed: Pushed | None,
) -> tuple[RunRecord, Pushed]:
    """A fresh disk: the run as its target holds it, accepted here."""

    if spec.push is None:
        raise CannotResume(
            f"no run {spec.name!r} here, and its spec pushes nowhere to read it from"
        )
    paths = RunPaths.decide(spec, state.absolute(), runs=runs, data=data)
    try:
        pushed = pushed or read_pushed(spec, paths)
    except PushFailed as exc:
        raise CannotResume(f"cannot resume {spec.name!r} from its push target: {exc}") from exc
    remote = remote_record(spec, pushed, state)
    assert pushed.manifest is not None  # remote_record refuses a target without one
    record = accept(
        spec, state, {"via": via, "resumed_from": pushed.where}, clock, runs=runs, data=data
    )
    carried: dict[str, Any] = {f.name: getattr(remote, f.name) for f in fields(remote)}
    for key in CARRIED:
        setattr(record, key, carried[key])
    # Whoever drove it there is gone with its machine: on this disk it ended, to go on.
    move(record, RunStatus.FINISHED, f"its machine is gone; read from {pushed.where}", clock.time())
    paths = RunPaths.load(state.absolute(), spec.name)
    pushed.manifest.write(paths.pushed_manifest)  # its pushed history: nothing sent twice
    RecordStore(state.absolute(), clock).save(record)
    return record, pushed


def remote_record(spec: Spec, pushed: Pushed, state: Path) -> RunRecord:
    """The run's record as its target holds it, once it names this run and this spec and may
    be resumed (not terminal, not complete); raises CannotResume."""
    rebuilt = rebuilt_record(spec, pushed, CannotResume)
    if rebuilt is not None:
        return rebuilt  # the record is gone, this run's verified weights are not
    if pushed.record is None or pushed.manifest is None:
        raise CannotResume(
            f"nothing to resume: no run {spec.name!r} on this disk, and {pushed.where} holds no "
            "runspec record of it"
        )
    named = pushed.record.get("name")
    if named != spec.name or pushed.manifest.run != spec.name:
        raise CannotResume(
            f"{pushed.where} holds another run, {printable(str(named))!r}, not {spec.name!r}: "
            "resume that run with its own spec"
        )
    try:
        remote = RunRecord.from_json(pushed.record)
    except (ValueError, TypeError, KeyError) as exc:
        raise CannotResume(f"{pushed.where} holds a damaged runspec record: {exc}") from exc
    _refuse_unresumable(spec, remote, state, target=pushed.where)
    return remote


def fetch_checkpoint(
    spec: Spec, paths: RunPaths, manifest: Manifest | None, commit: str | None
) -> Path | None:
    """The newest verified checkpoint `manifest` lists, downloaded into the run folder and
    checked against its sha256; at the commit the manifest was read at when known (a later
    push may have changed last.pt). Every node of a run resumes from this same file."""

    entry = newest_checkpoint(manifest.entries) if manifest is not None else None
    if entry is None:
        return None
    source = Source.of(spec, paths)
    try:
        if commit is None or source.hub is None:
            source.pin()
        else:
            source.commit = commit
        dest = paths.run_dir / entry.path
        source.download(entry, dest)
    except PushFailed as exc:
        raise CannotResume(f"cannot resume {spec.name!r}: {exc}") from exc
    return dest


def _reopen(
    spec: Spec,
    paths: RunPaths,
    record: RunRecord,
    store: RecordStore,
    keep_budget: bool,
    clock: Clock,
    source: str,
) -> str:
    now = clock.time()
    start = record.budget_started_at or record.started_at
    if keep_budget and start is not None:
        deadline = parse_utc_iso(start) + spec.budget.wall_clock
        left = max(deadline - now, 0.0)
        line = (
            f"resume: the budget left is {human_duration(left)} of "
            f"{human_duration(spec.budget.wall_clock)} (from {start}), until {utc_iso(deadline)}"
        )
    else:
        deadline = now + spec.budget.wall_clock
        record.budget_started_at = utc_iso(now)
        line = (
            f"resume: a new budget of {human_duration(spec.budget.wall_clock)}, until "
            f"{utc_iso(deadline)} (--keep-budget keeps what was left)"
        )
    record.started_at = record.started_at or utc_iso(now)
    record.deadline = utc_iso(deadline)
    old = record.status
    staged = record.data_yaml is not None and Path(record.data_yaml).is_file()
    if old in UNFINISHED_END:
        new = old  # its final push or finish was under way: that goes on first
    else:
        new = RunStatus.TRAINING if staged and record.epoch > 0 else RunStatus.PREFLIGHT
        record.termination, record.why, record.cause, record.finish = None, "", None, None
    record.push_error = None
    record.resumes += 1
    handle = TrainerHandle.find(paths)
    if handle is None or not handle.alive():  # a live one is re-attached, its files kept
        _clear_trainer(paths)
    reason = f"resumed from {source} ({'budget kept' if keep_budget else 'a new budget'})"
    store.transition(record, new, reason, via=Reopen.RESUME)
    return line + _cancel_left(paths, old)


def _cancel_left(paths: RunPaths, old: RunStatus) -> str:
    """A cancel `runspec cancel` accepted while nobody drove the run ("whoever drives it next"):
    at the final push it stands (no finish follows, as it said); before, the resume asked
    for since supersedes it. Said either way."""
    if not paths.cancel_file.exists():
        return ""
    if old in UNFINISHED_END:
        return "; the cancel asked before stands: no finish follows the final push"
    paths.cancel_file.unlink(missing_ok=True)
    return "; the cancel asked before is dropped: this resume continues the run"


def _clear_trainer(paths: RunPaths) -> None:
    """The old trainer's result and requests: a new one must not read them as its own."""
    paths.trainer_file.unlink(missing_ok=True)
    for name in (control.RESULT_FILE, control.STOP_FILE, control.STOPPING_FILE):
        (paths.control_dir / name).unlink(missing_ok=True)


def refinish(record: RunRecord, store: RecordStore) -> None:
    """A finished run back to its finish (`runspec push NAME --finish`, once its final push is
    verified): the machine's end judges it again, by the same gate as at its first end."""
    reason = "finish asked again after a verified push (runspec push --finish)"
    record.finish = None
    store.transition(record, RunStatus.FINISHING, reason, via=Reopen.REFINISH)


def resume_under_engine(
    spec: Spec, state: Path, engine: str, pushed: Pushed | None = None
) -> Resumed | None:
    """Under an engine every attempt is a resume when an earlier one left the run behind (on
    this disk, or on its push target for a fresh machine), with the budget that is left,
    never a new one; None for the first attempt. A run marked terminal, or a target that holds
    another run, raises CannotResume (exit 2: dstack retries on any error, so it must end).
    `pushed`: the target as the attempt ledger's gate read it, before its own commit."""
    try:
        here = RecordStore(state.absolute()).load(spec.name) is not None
    except DamagedRecord:
        here = True  # resume_run says what to do about it
    if here:
        return resume_run(spec, state, keep_budget=True, via=f"{engine} (a new attempt)")
    if spec.push is None:
        return None
    try:
        pushed = pushed or read_pushed(spec, RunPaths.decide(spec, state.absolute()))
    except PushFailed:
        return None  # nothing readable there: the first attempt's preflight says why
    if pushed.record is None and not holds_weights(spec, pushed):
        return None  # a first attempt: nothing of this run's there to overwrite
    via = f"{engine} (a new attempt)"
    return resume_run(spec, state, keep_budget=True, via=via, pushed=pushed)
