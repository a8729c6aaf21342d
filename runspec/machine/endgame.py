"""The machine's end, decided in one place: who may end this machine's billing, and when.

A finish that ends the machine (destroy, stop, auto, poweroff, or the unverified choice of any
finish) acts for every run on it, not only the one that asked. So it is armed here, in one
small file for the machine (`<state>/machine.json`, written atomically), and applied only when
no other run is still being driven or queued: the deferred finish, the idle finish, a run's own
finish and the failsafe timer all come through `Endgame`.

Each entry re-judges the machine from every run's files on disk (runspec.machine.verdict): whether
the machine may be destroyed is never taken from a saved flag. The file records how far the end got
(`armed`, then `applying` with the action chosen, then `applied` with its result), before each
step is taken, so an entry after any restart goes on from that step: an action once begun is
confirmed as it was begun, never chosen again and never requested twice.

`<state>/machine.lock` keeps two processes (the daemon, a `runspec run`, the failsafe) from
deciding the machine's end at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from runspec.alerts import Alerts
from runspec.clock import SYSTEM, Clock, utc_iso
from runspec.errors import RunspecError
from runspec.machine.decision import Decision, ends_machine, resolve
from runspec.machine.endwindow import end_until
from runspec.machine.finish import FinishContext, FinishHooks, FinishResult, apply_finish
from runspec.machine.host import FinishHost
from runspec.machine.machinefile import HISTORY_MAX, Pending, load_pending, resumable, save_pending
from runspec.machine.readback import unread
from runspec.machine.verdict import MachineVerdict, machine_verdict, run_safety
from runspec.providers.persist import Attempt
from runspec.spec.loader import load_accepted
from runspec.spec.model import FinishAction, FinishSpec, Spec
from runspec.store.finishrecord import EndAction, FinishRecord, FinishStep
from runspec.store.locks import FileLock, Holder
from runspec.store.owner import RunOwner, daemon_holder
from runspec.store.paths import RunPaths, StateLayout
from runspec.store.room import is_unwritable
from runspec.store.state import RunStatus
from runspec.views import messages

log = logging.getLogger("runspec.machine.endgame")

MACHINE = "the machine"  # on whose behalf the idle finish acts
FALLBACK_LOCK_DIR = Path("/run/runspec")  # the machine lock when the state folder is read-only


@dataclass(frozen=True)
class EndOutcome:
    """What an entry did: waited (`wait`, `blocked`), found nothing to do, or applied."""

    state: Literal["nothing", "wait", "blocked", "applied"]
    why: str
    result: FinishResult | None = None


def _result_from_json(data: dict[str, Any] | None) -> FinishResult | None:
    if not isinstance(data, dict):
        return None
    try:
        return FinishResult(**data)
    except TypeError:
        return None


class Endgame:
    def __init__(
        self,
        layout: StateLayout,
        *,
        clock: Clock = SYSTEM,
        dry_run: bool = False,
        host: FinishHost | None = None,
        say: Callable[[str], None] = print,
        notify: Sequence[str] = (),
    ) -> None:
        self.layout = layout
        self.clock = clock
        self.dry_run = dry_run
        self.host = host
        self.say = say
        self.notify = tuple(notify)  # the daemon's URLs, for runs without their own
        self.finish_host = host or FinishHost()
        self.fallback_lock_dir = FALLBACK_LOCK_DIR

    def alerts(self, run: str) -> Alerts:
        """Where word of this run's (or the machine's) end goes: its spec's URLs, else ours."""
        try:
            own = load_accepted(self.layout.run_paths(run).spec_file).notify
        except RunspecError:
            own = None  # the idle finish's "run", or a spec gone unreadable
        return Alerts.choose(own, self.notify, self.say)

    # --- the file -------------------------------------------------------------------------
    def load(self) -> Pending | None:
        return load_pending(self.layout)

    def _save(self, pending: Pending | None, event: str) -> None:
        try:
            save_pending(self.layout, pending, event, self.clock)
        except OSError as exc:
            if not is_unwritable(exc):
                raise
            # A read-only state folder never stops the machine's end: it goes on unrecorded
            # (a restart finds the folder as it was, and no other writer can exist).
            self.say(f"cannot record the machine's end ({exc}); going on without it")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[bool]:
        """The machine lock for the block: True when ours, False when another process is
        deciding the machine's end right now (it is left to them)."""
        lock: FileLock | None = None
        try:
            lock = FileLock(self.layout.machine_lock)
            other = lock.try_acquire()
        except OSError as exc:
            if not is_unwritable(exc):
                raise
            lock, other = self._lock_elsewhere(exc)
        if other is not None:
            self.say(f"the machine's end is being decided by {other}; leaving it to them")
            yield False
            return
        try:
            yield True
        finally:
            if lock is not None:
                lock.release()

    def _lock_elsewhere(self, exc: OSError) -> tuple[FileLock | None, Holder | None]:
        """A read-only state folder: the lock under /run, or none where nothing is writable."""
        digest = hashlib.sha256(str(self.layout.state.absolute()).encode()).hexdigest()[:16]
        lock = FileLock(self.fallback_lock_dir / f"machine-{digest}.lock")
        try:
            self.fallback_lock_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            other = lock.try_acquire()
        except OSError as again:
            self.say(f"the machine lock cannot be taken ({exc}; {again}); acting without it")
            return None, None
        self.say(f"the state folder is read-only ({exc}); the machine lock is {lock.path}")
        return lock, other

    # --- arming ---------------------------------------------------------------------------
    def arm(
        self,
        run: str,
        finish: FinishSpec,
        *,
        hourly_cost: float | None,
        weights: str,
        why: str,
        force_unverified: bool = False,
    ) -> None:
        """Ask for the machine's end on behalf of `run` (the last asker wins, as spec-v1 says
        of queued specs). An end already being applied is never replaced."""
        with self._locked() as mine:
            if not mine:
                return
            current = self.load()
            if current is not None and current.step == "applying":
                return
            if current is not None and current.run == run and current.step == "applied":
                return  # this run's end was applied already (re-entered after a restart)
            pending = Pending(
                run=run,
                finish=finish,
                hourly_cost=hourly_cost,
                weights=weights,
                why=why,
                armed_at=utc_iso(self.clock.time()),
                force_unverified=force_unverified,
            )
            replaced = f" (replacing the one armed for {current.run})" if current else ""
            self._save(pending, f"armed {finish.action.value} for {run}: {why}{replaced}")

    # --- entering -------------------------------------------------------------------------
    def enter(
        self,
        *,
        finishing: str | None = None,
        announce: Callable[[Decision], None] | None = None,
    ) -> EndOutcome:
        """Apply the armed end if the machine may end now; go on from wherever a previous
        entry stopped. `finishing`: the run whose own end this is (judged by its files);
        `announce`: how that run tells the decision, right before it is acted on."""
        with self._locked() as mine:
            if not mine:
                return EndOutcome("wait", "another process is deciding the machine's end")
            return self._enter(finishing, announce)

    def _enter(
        self, finishing: str | None, announce: Callable[[Decision], None] | None = None
    ) -> EndOutcome:
        pending = self.load()
        if pending is None:
            return EndOutcome("nothing", "no machine-ending finish is armed")
        if pending.step == "applied":
            return EndOutcome("applied", "applied before", _result_from_json(pending.result))
        if pending.step == "applying" and pending.action is not None:
            # Begun before a restart: finished as it was begun, never chosen again; judged
            # again all the same, so a destroy is never sent anew onto unsafe weights.
            self.say(f"the machine's end ({pending.action}) was under way; confirming it")
            now_safe = self.judge(finishing).safe
            return self._apply(pending, now_safe, resume=pending.action, announce=lambda told: None)
        verdict = self.judge(finishing)
        if verdict.verdict in ("wait", "blocked"):
            if pending.judged != verdict.why:
                pending.judged = verdict.why
                self._save(pending, f"the end armed for {pending.run} waits: {verdict.why}")
                self.say(f"the machine's end waits: {verdict.why}")
            return EndOutcome(verdict.verdict, verdict.why)
        verified = verdict.safe and not pending.force_unverified
        self.say(f"the machine's end: {verdict.why}")
        pending.judged = verdict.why
        # A run's own end is told by its run (announce); a deferred or idle end is told here.
        mine = pending.run == finishing and announce is not None
        return self._apply(pending, verified, resume=None, announce=announce if mine else None)

    def judge(self, finishing: str | None = None) -> MachineVerdict:
        daemon = daemon_holder(self.layout)
        return machine_verdict(self.layout, finishing=finishing, daemon_alive=daemon is not None)

    def _apply(
        self,
        pending: Pending,
        verified: bool,
        *,
        resume: EndAction | None,
        announce: Callable[[Decision], None] | None = None,
    ) -> EndOutcome:
        alerts = self.alerts(pending.run)
        host = self.finish_host
        decision = resolve(
            pending.finish, verified, host, clock=self.clock, say=self.say, resume=resume
        )
        fresh_destroy = decision.action is EndAction.DESTROY and resume is None
        not_read = unread(self.layout, self.say) if fresh_destroy else None
        if not_read is not None:
            # A destroy ends every run's disk: every run's weights must have read back.
            self.say(f"the machine is not destroyed: {not_read}")
            verified = False
            decision = resolve(pending.finish, False, host, clock=self.clock, say=self.say)
        if announce is not None:
            announce(decision)
        else:
            alerts.send_and_wait(messages.machine_end(pending.run, decision.line, decision.why))
        if pending.until is None:
            pending.until = end_until(self.layout, pending.run, host, self.clock.time())

        def begin(action: EndAction) -> None:
            # Written before the action is taken: a restart then confirms it, never repeats it.
            if (pending.step, pending.action) != ("applying", action):
                pending.step, pending.action, pending.verified = "applying", action, verified
                self._save(pending, f"applying {action} for {pending.run}")

        def attempt(tried: Attempt) -> None:
            pending.attempts = [*pending.attempts, tried.to_json()][-HISTORY_MAX:]
            self._save(pending, f"{tried.action} for {pending.run}: {tried.answer}")

        def refused(why: str) -> None:
            alerts.send_and_wait(messages.unconfirmed(pending.run, why, "asked again: no"))

        result = apply_finish(
            pending.finish,
            FinishContext(pending.run, pending.hourly_cost, pending.weights),
            verified=verified,
            dry_run=self.dry_run,
            clock=self.clock,
            log=self.say,
            host=host,
            resume=resume,
            decision=decision,
            hooks=FinishHooks(begin, attempt, refused),
            until=pending.until,
        )
        pending.step, pending.result = "applied", result.to_json()
        pending.action = pending.action or result.action
        self._save(pending, f"applied for {pending.run}: {result.summary}")
        self._unconfirmed(alerts, pending.run, result)
        return EndOutcome("applied", result.summary, result)

    def _unconfirmed(self, alerts: Alerts, run: str, result: FinishResult) -> None:
        """A finish that did not do what it set out to (a refused destroy, a kept machine):
        the person who walked away must hear the machine may still bill."""
        if not result.ok and not result.dry_run:
            alerts.send_and_wait(messages.unconfirmed(run, result.summary, result.detail))

    # --- a run's own finish -------------------------------------------------------------
    def finish_run(self, spec: Spec, paths: RunPaths, owner: RunOwner) -> None:
        """A run's finishing phase: its own finish here and now when it does not end the
        machine (none, a verified command, an unverified finish whose choice is keep), else
        armed for the machine and applied once nothing else is being driven."""
        finish = spec.finish
        safety = run_safety(paths, spec, owner.record)
        alerts = Alerts.choose(spec.notify, self.notify, self.say)

        def announce(decision: Decision) -> None:
            # Told before the finish acts: a destroy ends the machine and every thread on it.
            dry = " (dry run)" if self.dry_run else ""
            nxt = f"finish{dry}: {decision.action} ({decision.why})"
            alerts.send_and_wait(messages.ended(spec, paths, owner.record, safety.safe, nxt))

        if not ends_machine(finish, safety.safe):
            begun = owner.record.finish
            resume = begun.action if begun and begun.step is FinishStep.APPLYING else None
            decision = resolve(
                finish, safety.safe, self.finish_host, clock=self.clock, say=self.say, resume=resume
            )
            announce(decision)

            def begin(action: EndAction) -> None:
                # Recorded before a command runs: a restart never runs it a second time.
                owner.finish_noted(FinishRecord.applying(action))

            result = apply_finish(
                finish,
                FinishContext(spec.name, spec.budget.hourly_cost, str(paths.run_dir)),
                verified=safety.safe,
                dry_run=self.dry_run,
                clock=self.clock,
                log=self.say,
                host=self.finish_host,
                resume=resume,
                decision=decision,
                hooks=FinishHooks(begin=begin),
            )
            owner.finish_noted(FinishRecord.applied(result))
            owner.transition(RunStatus.FINISHED, f"finish: {result.summary}")
            self._unconfirmed(alerts, spec.name, result)
            self.enter()  # another run's end may have waited for this one
            return
        self.arm(
            spec.name,
            finish,
            hourly_cost=spec.budget.hourly_cost,
            weights=str(paths.run_dir),
            why=f"run {spec.name} ended ({safety.why})",
            # A command finish reaches the machine's end only as its unverified choice.
            force_unverified=finish.action is FinishAction.COMMAND,
        )
        outcome = self.enter(finishing=spec.name, announce=announce)
        if outcome.result is not None:
            owner.finish_noted(FinishRecord.applied(outcome.result))
            owner.transition(RunStatus.FINISHED, f"finish: {outcome.result.summary}")
        else:
            deferred = FinishRecord.deferred(outcome.why)
            self.say(deferred.summary)
            said = f"finish{' (dry run)' if self.dry_run else ''}: deferred ({outcome.why})"
            alerts.send_and_wait(messages.ended(spec, paths, owner.record, safety.safe, said))
            owner.finish_noted(deferred)
            owner.transition(RunStatus.FINISHED, deferred.summary)

    # --- the failsafe ---------------------------------------------------------------------
    def failsafe(self, run: str, finish: FinishSpec, hourly_cost: float | None) -> EndOutcome:
        """The timer fired and the run never ended: its unverified choice, unless the machine
        is safe or already ending. Nothing waits any more: the deadline is long past."""
        with self._locked() as mine:
            if not mine:
                return EndOutcome("wait", "another process is deciding the machine's end")
            current = self.load()  # an end under way is finished, if the armed spec says so
            if current is not None and current.step == "applying" and resumable(current, finish):
                return self._enter(run)
            if current is not None and _ended_the_machine(current):
                return EndOutcome("applied", "the machine's end was applied already")
            verdict = machine_verdict(self.layout, finishing=run, daemon_alive=False)
            if verdict.verdict in ("blocked", "wait"):
                # A damaged run, or another run still driven by a live process: runspec is
                # not dead, and nothing may end the machine under a run being driven.
                return EndOutcome(verdict.verdict, verdict.why)
            pending = Pending(
                run=run,
                finish=finish,
                hourly_cost=hourly_cost,
                weights=str(self.layout.run_paths(run).run_dir),
                why="the failsafe timer fired: the run never ended",
                armed_at=utc_iso(self.clock.time()),
                judged=verdict.why,
            )
            self.say(f"failsafe: {verdict.why}")
            return self._apply(pending, verdict.safe, resume=None)


def _ended_the_machine(pending: Pending) -> bool:
    """An end applied for real (not kept running, not a dry run, not a command)."""
    result = pending.result or {}
    return (
        pending.step == "applied"
        and bool(result.get("ok"))
        and not result.get("dry_run")
        and result.get("action") in ("stop", "destroy", "poweroff")
    )
