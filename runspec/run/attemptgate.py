"""Every attempt under an engine passes this gate first, before its preflight (issue 36).

`open_attempt` reads the run's ledger at its push target (runspec.run.attempts) and decides,
before anything slow is paid for:

- a new task id (the engine's id for the run differs from the ledger's) starts a new run: a new
  ledger, a new budget, training from scratch;
- a run the ledger marks terminal exits at once with the status it ended with (0 or 2);
- a run whose budget is spent exits 0, saying what the target holds: its budget started with
  its first attempt, on whatever machine;
- after NO_PROGRESS_LIMIT attempts in a row that added no verified epoch, the run is marked
  terminal and exits 2, which no engine recovers (`recover_on_exit_codes` names 75 only, and
  dstack's retry on `error` finds the mark): a deterministic failure asks for that many machines
  at most, never an endless series;
- otherwise this attempt is written to the ledger, and `resume` reopens the run with the
  budget left: from the newest verified checkpoint, or from scratch when none was pushed yet
  (an epoch-1 preemption), never with a new budget.

`close` writes the attempt's end and turns a 75 into 2 when this attempt was the last one the
bound allows; a 0 or 2 marks the ledger terminal, so an engine that retries anyway (dstack on
`error`) ends at the next gate.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path

from runspec.clock import SYSTEM, Clock, human_duration, parse_utc_iso, utc_iso
from runspec.errors import EXIT_CODES, Outcome, UsageError
from runspec.hubread import HubRefused
from runspec.printable import printable
from runspec.push.base import PushFailed, one_line
from runspec.push.fetch import Pushed, Source, read_pushed
from runspec.push.hubrecord import newest_checkpoint
from runspec.push.remote import ATTEMPTS
from runspec.run.accept import accept
from runspec.run.attempts import WRITE_S, Attempt, Ledger, read_ledger, write_ledger
from runspec.run.resume import NothingToResume, Resumed, resume_under_engine
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths
from runspec.store.state import RecordStore, Reopen, RunRecord, RunStatus, move
from runspec.voice import error, warning

NO_PROGRESS_LIMIT = 3  # attempts in a row with no new verified epoch before the run ends
READ_PAUSE_S = 5.0  # between reads of a target that failed, within WRITE_S
CLOSE_SIGNALLED_S = 2.0  # the end's write after a stop signal, inside the engine's grace
Say = Callable[[str], None]


def verified_epoch(pushed: Pushed) -> int:
    """The epoch of the newest verified checkpoint the target's manifest lists (0: none)."""
    entry = newest_checkpoint(pushed.manifest.entries) if pushed.manifest is not None else None
    epoch = entry.epoch if entry is not None else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch > 0 else 0


@dataclasses.dataclass
class AttemptGate:
    """This attempt's place in its run; `early` set: exit with it now, before anything slow."""

    spec: Spec
    source: Source
    ledger: Ledger
    attempt: Attempt | None
    say: Say
    new_run: bool = False
    # The target's record and weights are an older run's (a new task taken before its first
    # push): this run goes on from scratch with its own budget left, as its followers do.
    older_run_held: bool = False
    early: Outcome | None = None
    pushed: Pushed | None = None  # the target as read before this attempt's own commit
    clock: Clock = SYSTEM

    @property
    def budget_start(self) -> float:
        return parse_utc_iso(self.ledger.budget_started_at)

    def resume(self, state: Path, engine: str) -> Resumed | None:
        """The run reopened as an engine's new attempt (the caller holds its lock), with the
        budget the ledger says is left; None: a first attempt, the lifecycle starts it."""
        if self.new_run:
            return None  # another task's records at the target are not this run's
        store = RecordStore(state.absolute(), self.clock)
        done: Resumed | None = None
        try:
            if not self.older_run_held:
                done = resume_under_engine(self.spec, state, engine, self.pushed)
        except NothingToResume:
            done = None  # nothing verified was pushed: from scratch, with the budget left
        else:
            first = self.attempt is None or self.attempt.n == 1
            if done is None and first and not self.older_run_held:
                return None  # the first attempt: the lifecycle starts its budget
        if done is not None:
            line = self._hold_budget(done.record, store, fresh=False)
            return dataclasses.replace(done, budget_line=f"{done.budget_line}; {line}")
        # The record a target without a checkpoint held is accepted here already.
        record = store.load(self.spec.name) or accept(self.spec, state, {"via": engine})
        line = self._hold_budget(record, store, fresh=True)
        return Resumed(record, None, "no verified checkpoint at its target: from scratch", line)

    def _hold_budget(self, record: RunRecord, store: RecordStore, fresh: bool) -> str:
        """The record's deadline from its budget start, the ledger's where the target held no
        record (the ledger's is the gate's time, seconds before the lifecycle's start)."""
        now = self.clock.time()
        held = record.budget_started_at or record.started_at
        start = parse_utc_iso(held) if held is not None else self.budget_start
        deadline = start + self.spec.budget.wall_clock
        record.budget_started_at, record.deadline = utc_iso(start), utc_iso(deadline)
        if fresh:
            reason = "an engine's new attempt: from scratch, with the budget left"
            move(record, RunStatus.PREFLIGHT, reason, now, via=Reopen.RESUME)
            record.termination, record.why, record.finish = None, "", None
            record.started_at = record.started_at or utc_iso(now)
            record.total_epochs = self.spec.train.epochs
        store.save(record)
        n = self.attempt.n if self.attempt is not None else 0
        return (
            f"attempt {n}: the budget left is {human_duration(max(deadline - now, 0.0))} of "
            f"{human_duration(self.spec.budget.wall_clock)} (from {utc_iso(start)})"
        )

    def close(self, record: RunRecord, outcome: Outcome, signalled: bool = False) -> Outcome:
        """This attempt's end in the ledger; the outcome to exit with (a 75 past the bound
        becomes 2). `signalled`: the engine's SIGKILL is near, so the write gets a moment only
        (an attempt's end is a nicety: the next gate judges it by the target)."""
        if self.attempt is None:
            return outcome
        now = utc_iso(self.clock.time())
        pushed = record.last_push.epoch if record.last_push is not None else None
        verified = max(pushed or 0, self.attempt.verified_epoch)
        if outcome in (Outcome.RETRY, Outcome.FAILED):
            count = self.ledger.no_progress(verified)
            if count >= NO_PROGRESS_LIMIT:
                self.say(error(bound_line(count)))
                outcome = Outcome.INVALID
        code = EXIT_CODES[outcome]
        self.attempt.ended_at, self.attempt.exit, self.attempt.outcome = now, code, outcome.value
        if code in (0, 2) and self.ledger.terminal is None:
            why = record.why or record.reason or outcome.value
            self.ledger.terminal = {"reason": printable(why)[:200], "exit": code, "at": now}
        message = f"runspec: attempt {self.attempt.n} ended (exit {code})"
        self._write(message, CLOSE_SIGNALLED_S if signalled else WRITE_S)
        return outcome

    def _write(self, message: str, total_s: float = WRITE_S) -> bool:
        try:
            write_ledger(self.source, self.spec, self.ledger, message, total_s)
        except PushFailed as exc:
            self.say(warning(f"cannot write {ATTEMPTS} at {self.source.where}: {exc}"))
            return False
        return True


def bound_line(count: int) -> str:
    return (
        f"{count} attempts in a row added no verified epoch: the run is marked terminal "
        "(exit 2), so the engine asks for no more machines; fix what the log above says, "
        "then launch it again (a new task)"
    )


def open_attempt(
    spec: Spec, state: Path, engine: str, task_id: str | None, say: Say, clock: Clock = SYSTEM
) -> AttemptGate | None:
    """The gate for this attempt, or None where there is no ledger to keep (no push target).
    A target that cannot be read within WRITE_S sets `early` to 75: where the run stands is
    unknown, and training it from scratch with a new budget could write over its weights.
    Raises DamagedLedger, and UsageError where the Hub refuses the token or the target's
    record is damaged (reading again would not change it: exit 2, not an endless 75)."""
    if spec.push is None:
        return None
    source = Source.of(spec, RunPaths.decide(spec, state.absolute()))
    try:
        pushed, ledger = _read_target(spec, state, source, say, clock)
    except PushFailed as exc:
        return _unread(spec, source, task_id, exc, say, clock)
    now = clock.time()
    gate = AttemptGate(spec, source, _new_ledger(spec, task_id, pushed, now), None, say)
    gate.clock, gate.pushed = clock, pushed
    if ledger is not None and task_id is not None and ledger.task_id not in (None, task_id):
        old = printable(str(ledger.task_id))
        new = printable(task_id)
        say(f"task {new} is new (the target's attempts are task {old}'s): a new run, from scratch")
        gate.new_run = True
        gate.ledger = Ledger(spec.name, spec.sha256, task_id, utc_iso(now))
    elif ledger is not None:
        gate.ledger = ledger
    # A new run counts its own epochs: the older run's weights there are not its progress.
    gate.older_run_held = not gate.new_run and _older_than(pushed, gate.ledger)
    verified = 0 if gate.new_run or gate.older_run_held else verified_epoch(pushed)
    early = _judge(gate, verified, now)
    if early is not None:
        gate.early = early
        return gate
    n = (gate.ledger.attempts[-1].n if gate.ledger.attempts else 0) + 1
    held = verified_epoch(pushed)  # followers read it: runspec.run.followstart
    gate.attempt = Attempt(
        n, utc_iso(now), verified, engine, target_epoch=held, commit=pushed.commit
    )
    gate.ledger.attempts.append(gate.attempt)
    if gate._write(f"runspec: attempt {n} started"):
        say(f"attempt {n} of this run under {engine}, recorded at {source.where} ({ATTEMPTS})")
    return gate


def _read_target(
    spec: Spec, state: Path, source: Source, say: Say, clock: Clock
) -> tuple[Pushed, Ledger | None]:
    """The target's record and manifest, and its ledger at the same commit, read again for
    WRITE_S at most while the Hub fails. Raises PushFailed."""
    until = clock.monotonic() + WRITE_S
    while True:
        try:
            pushed = read_pushed(spec, RunPaths.decide(spec, state.absolute()))
            source.commit = pushed.commit
            ledger = read_ledger(source) if pushed.commit is not None or source.folder else None
        except PushFailed as exc:
            if exc.permanent or clock.monotonic() + READ_PAUSE_S > until:
                raise
            say(warning(f"{ATTEMPTS} unread ({one_line(exc)}): trying again"))
            clock.sleep(READ_PAUSE_S)
            continue
        return pushed, ledger


def _unread(
    spec: Spec, source: Source, task_id: str | None, exc: PushFailed, say: Say, clock: Clock
) -> AttemptGate:
    """A target the gate could not read: exit 2 where reading again would not change it,
    else 75 before anything slow."""
    if exc.permanent:
        fix = (
            "give the job a Hub token that may read it (the engine's HF_TOKEN secret)"
            if isinstance(exc.__cause__, HubRefused)
            else "delete the damaged file there to start the run over"
        )
        raise UsageError(f"{one_line(exc)}: where the run stands cannot be read; {fix}")
    say(
        error(
            f"cannot read {source.where} within {WRITE_S:.0f} s ({one_line(exc)}): where the "
            "run stands is unknown, so nothing is trained: exit 75 (a fresh machine)"
        )
    )
    ledger = Ledger(spec.name, spec.sha256, task_id, utc_iso(clock.time()))
    return AttemptGate(spec, source, ledger, None, say, early=Outcome.RETRY, clock=clock)


def _older_than(pushed: Pushed, ledger: Ledger) -> bool:
    """Whether the target's record is of a run whose budget started before this ledger's: an
    older task's, which the ledger's first attempt started beside (a first ledger over a run
    from before ledgers takes that run's budget start, so it is never older)."""
    held = (pushed.record or {}).get("budget_started_at")
    try:
        return isinstance(held, str) and parse_utc_iso(held) < parse_utc_iso(
            ledger.budget_started_at
        )
    except ValueError:
        return False


def _new_ledger(spec: Spec, task_id: str | None, pushed: Pushed, now: float) -> Ledger:
    """A first ledger; a target that holds this run's record from before ledgers keeps its
    budget start."""
    start = now
    held = (pushed.record or {}).get("budget_started_at")
    if isinstance(held, str) and (pushed.record or {}).get("name") == spec.name:
        with contextlib.suppress(ValueError):
            start = min(now, parse_utc_iso(held))
    return Ledger(spec.name, spec.sha256, task_id, utc_iso(start))


def _judge(gate: AttemptGate, verified: int, now: float) -> Outcome | None:
    """The exit status this attempt must take before anything slow, or None to go on."""
    ledger, spec, say = gate.ledger, gate.spec, gate.say
    if ledger.terminal is not None:
        code = ledger.terminal["exit"]
        why = printable(str(ledger.terminal["reason"]))
        at = printable(str(ledger.terminal["at"]))
        line = f"run {spec.name!r} ended for good at {at} ({why}): exit {code}, nothing is run"
        say(error(f"{line}; launch it again as a new task to train again"))
        return Outcome.OK if code == 0 else Outcome.INVALID
    deadline = gate.budget_start + spec.budget.wall_clock
    if now >= deadline:
        at = f"epoch {verified}" if verified else "no verified checkpoint"
        budget = human_duration(spec.budget.wall_clock)
        ended = f"the budget of {budget} from {ledger.budget_started_at} ended {utc_iso(deadline)}"
        say(f"{ended}: nothing more is trained; {gate.source.where} holds {at}: exit 0")
        ledger.terminal = {"reason": "budget spent", "exit": 0, "at": utc_iso(now)}
        gate._write("runspec: the budget is spent")
        return Outcome.OK
    count = ledger.no_progress(verified) if ledger.attempts else 0
    if count >= NO_PROGRESS_LIMIT:
        say(error(bound_line(count)))
        ledger.terminal = {"reason": bound_line(count), "exit": 2, "at": utc_iso(now)}
        gate._write("runspec: no progress in the last attempts: terminal")
        return Outcome.INVALID
    return None
