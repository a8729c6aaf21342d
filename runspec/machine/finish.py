"""The end of billing: the finish action, only after a verified final push.

spec-v1.md "When the finish runs": the spec's action runs once the final push is verified. When
it could not be verified, `finish.unverified` decides instead (stop: the disk and the weights on
it survive; keep: the machine stays up, said loudly; poweroff), and nothing ever destroys
unverified weights. Every action first says exactly what it is about to do; a dry run stops
there. The machine-facing seams (container detection, the poweroff commands, the provider) sit in
`FinishHost`, so tests point them at harmless stand-ins.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runspec.clock import SYSTEM, Clock, human_duration, utc_iso
from runspec.machine.decision import Decision, resolve
from runspec.machine.host import NO_POWEROFF_ENV, REAL_POWEROFF, FinishHost, container_reason
from runspec.providers import Action, Provider, ProviderError, ProviderOutcome
from runspec.providers.persist import Attempt, Refused, Window, keep_ending
from runspec.secrets.apartuid import as_root
from runspec.spec.model import FinishSpec
from runspec.store.finishrecord import EndAction, FinishResult
from runspec.voice import error

log = logging.getLogger("runspec.machine.finish")

POWEROFF_TIMEOUT = 60.0
LOUD = "!!! "


@dataclass(frozen=True)
class FinishContext:
    """On whose behalf a finish runs, and what a person needs to hear about it."""

    name: str  # the run (or "the machine" for the idle finish)
    hourly_cost: float | None = None
    weights: str = "the run folder"  # where the newest weights are, if they stay behind


def _nothing(_: object) -> None:
    return None


@dataclass(frozen=True)
class FinishHooks:
    """What the caller hears while a finish acts: the action right before it is taken, each
    provider attempt, and a provider's permanent refusal (said to a person at once)."""

    begin: Callable[[EndAction], None] = _nothing
    attempt: Callable[[Attempt], None] = _nothing
    refused: Callable[[str], None] = _nothing


class _Finisher:
    def __init__(
        self,
        finish: FinishSpec,
        ctx: FinishContext,
        decision: Decision,
        *,
        dry_run: bool,
        host: FinishHost,
        clock: Clock,
        say: Callable[[str], None],
        hooks: FinishHooks,
        resume: EndAction | None = None,
        until: float | None = None,
    ) -> None:
        self.finish = finish
        self.decision = decision
        # Told the action right before anything irreversible is done (runspec.machine.endgame
        # records it, so a restart confirms it instead of choosing again), each provider attempt,
        # and a provider's permanent refusal (a person hears of it at once).
        self.hooks = hooks
        self.ctx = ctx
        self.resume = resume  # an action requested before a restart: confirm, never repeat
        self.verified = decision.verified
        self.dry_run = dry_run
        self.host = host
        self.clock = clock
        self.say = say
        self.started = clock.time()
        self.mono = clock.monotonic()
        # The wall-clock time the end stops retrying (kept across restarts by the endgame).
        self.until = until if until is not None else self.started + host.end_window

    def result(
        self, action: EndAction, ok: bool, plan: str, summary: str, detail: str = "", **extra: Any
    ) -> FinishResult:
        return FinishResult(
            requested=self.finish.action.value,
            action=action,
            verified=self.verified,
            dry_run=self.dry_run,
            ok=ok,
            plan=plan,
            summary=summary,
            detail=detail,
            started_at=utc_iso(self.started),
            seconds=round(self.clock.monotonic() - self.mono, 3),
            **extra,
        )

    def announce(self, plan: str) -> None:
        log.info("%s: finish%s: %s", self.ctx.name, " (dry run)" if self.dry_run else "", plan)
        if self.dry_run:
            self.say(f"finish (dry run, nothing done): would {plan}")
        else:
            self.say(f"finish: about to {plan}")

    def loud(self, text: str) -> None:
        self.say(error(LOUD + text))

    def run(self) -> FinishResult:
        decision = self.decision
        action, why = decision.action, decision.why
        if decision.unresolved_auto:
            plan = f"choose stop or destroy ({decision.provider_error})"
            self.announce(plan)
            return self.kept(plan, why)
        if action is EndAction.NONE:
            return self.none(why)
        self.say(f"finish: {why}")
        if action is EndAction.KEEP:
            return self.keep()
        if action is EndAction.COMMAND:
            return self.command()
        if action is EndAction.POWEROFF:
            return self.poweroff()
        return self.through_provider(
            Action(action.value), decision.provider, decision.provider_error
        )

    def not_repeated(self, action: str, plan: str) -> FinishResult:
        """A command or poweroff begun before a restart: running it twice could do harm."""
        self.announce(f"{plan}: NOT repeated")
        return self.kept(
            plan, f"the {action} was begun before runspec restarted; it is never run twice"
        )

    def none(self, why: str) -> FinishResult:
        # Nothing is done, so nothing is announced: one line says so.
        plan = "leave the machine as it is (finish.action: none)"
        self.say(f"finish: none: the machine is left as it is ({why})")
        if not self.verified:
            self.loud(
                "the final push was NOT verified: the newest weights may exist only on this "
                f"machine, in {self.ctx.weights}"
            )
        return self.result(EndAction.NONE, True, plan, "none: machine left running", why)

    def keep(self) -> FinishResult:
        plan = "KEEP the machine running (finish.unverified: keep)"
        self.announce(plan)
        return self.kept(plan, "finish.unverified is keep", ok=True)

    def kept(self, plan: str, reason: str, ok: bool = False) -> FinishResult:
        hourly = self.ctx.hourly_cost
        bill = f" at ${hourly:.4f}/h" if hourly is not None else ""
        self.loud(
            f"THE MACHINE IS STILL RUNNING AND BILLING{bill}: {reason}. The weights are in "
            f"{self.ctx.weights}; stop or destroy the machine yourself once they are safe."
        )
        return self.result(EndAction.KEEP, ok, plan, f"kept running: {reason}", reason)

    def command(self) -> FinishResult:
        if self.resume is EndAction.COMMAND:
            return self.not_repeated("command", f"run {list(self.finish.command)}")
        argv = list(self.finish.command)
        exe = argv[0] if "/" in argv[0] else shutil.which(argv[0])
        plan = f"run {argv} (no shell, timeout {human_duration(self.host.command_timeout)})"
        self.announce(plan)
        if self.dry_run:
            return self.result(EndAction.COMMAND, True, plan, "dry run: command not run")
        self.hooks.begin(EndAction.COMMAND)
        if exe is None:
            detail = f"{argv[0]!r} is not on PATH"
            self.say(f"finish: command failed: {detail}")
            return self.result(EndAction.COMMAND, False, plan, f"command failed: {detail}", detail)
        try:
            proc = subprocess.run(
                [exe, *argv[1:]],
                capture_output=True,
                text=True,
                timeout=self.host.command_timeout,
                check=False,
                stdin=subprocess.DEVNULL,
                **as_root(),  # uid 0 whole, from a driver kept apart (secrets.apartuid)
            )
        except subprocess.TimeoutExpired:
            detail = f"no exit within {human_duration(self.host.command_timeout)}"
            self.say(f"finish: command killed: {detail}")
            return self.result(
                EndAction.COMMAND, False, plan, f"command timed out: {detail}", detail
            )
        except OSError as exc:
            self.say(f"finish: command failed: {exc}")
            return self.result(EndAction.COMMAND, False, plan, f"command failed: {exc}", str(exc))
        for stream, text in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            for line in text.splitlines()[-50:]:
                self.say(f"finish: command {stream}: {line}")
        ok = proc.returncode == 0
        summary = f"command exited {proc.returncode}"
        self.say(f"finish: {summary}")
        return self.result(EndAction.COMMAND, ok, plan, summary, summary)

    def poweroff(self) -> FinishResult:
        first = " ".join(self.host.poweroff_commands[0]) if self.host.poweroff_commands else "-"
        plan = f"power off this machine ({first}, else the next of {self.host.poweroff_commands})"
        if self.resume is EndAction.POWEROFF:
            return self.not_repeated("poweroff", plan)
        reason = container_reason(self.host)
        real = self.host.poweroff_commands == REAL_POWEROFF
        if reason is None and real and os.environ.get(NO_POWEROFF_ENV):
            reason = f"{NO_POWEROFF_ENV} is set (the test suite)"
        if reason is not None:
            plan = "power off this machine: REFUSED"
            self.announce(plan)
            why = (
                f"this is a container ({reason}): a poweroff here ends no billing, the provider "
                "keeps the instance; use finish.action stop or destroy with finish.provider"
                if NO_POWEROFF_ENV not in reason
                else f"a real poweroff is forbidden here: {reason}"
            )
            return self.kept(plan, f"poweroff refused: {why}")
        self.announce(plan)
        if self.dry_run:
            return self.result(EndAction.POWEROFF, True, plan, "dry run: not powered off")
        self.hooks.begin(EndAction.POWEROFF)
        errors = []
        for argv in self.host.poweroff_commands:
            exe = shutil.which(argv[0])
            if exe is None:
                errors.append(f"{argv[0]}: not found")
                continue
            self.say(f"finish: running {list(argv)}")
            try:
                proc = subprocess.run(
                    [exe, *argv[1:]],
                    capture_output=True,
                    text=True,
                    timeout=POWEROFF_TIMEOUT,
                    check=False,
                    stdin=subprocess.DEVNULL,
                    **as_root(),
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                errors.append(f"{argv[0]}: {exc}")
                continue
            if proc.returncode == 0:
                return self.result(
                    EndAction.POWEROFF, True, plan, f"powering off ({' '.join(argv)})"
                )
            errors.append(f"{argv[0]} exited {proc.returncode}: {proc.stderr.strip()[:200]}")
        return self.kept(plan, "poweroff failed: " + "; ".join(errors))

    def through_provider(
        self, action: Action, provider: Provider | None, provider_error: str
    ) -> FinishResult:
        resumed = self.resume is not None and self.resume.value == action.value
        if action is Action.DESTROY and not self.verified and not resumed:
            # Never reached by decide(); a guard.
            return self.kept("destroy: REFUSED", "the final push is not verified")
        if provider is None:
            plan = f"{action.value} this machine through its provider: IMPOSSIBLE"
            self.announce(plan)
            return self.kept(plan, f"no provider: {provider_error}")
        if action is Action.STOP and not provider.can_stop:
            plan = f"{action.value} this {provider.name} machine: IMPOSSIBLE"
            self.announce(plan)
            return self.kept(plan, provider.stop_bills)
        try:
            plan = provider.plan(action)
        except ProviderError as exc:
            plan = f"{action.value} this machine through {provider.name}"
            self.announce(plan)
            return self.kept(plan, f"cannot identify the instance: {exc}")
        self.announce(plan)
        if self.dry_run:
            return self.result(
                EndAction(action.value), True, plan, f"dry run: not {action.value}ed"
            )
        self.hooks.begin(EndAction(action.value))
        # Sent anew only when every run is safe now; else only confirmed (a run arrived since).
        send = not (resumed and action is Action.DESTROY and not self.verified)
        outcome, refused = self.keep_trying(provider, action, resumed, send, share=0.5)
        if not (outcome and outcome.confirmed) and action is Action.DESTROY and provider.can_stop:
            # A destroy that keeps failing: a stop still ends the GPU's billing, disk kept.
            why = refused or (outcome.detail if outcome else "")
            self.loud(f"the destroy did not happen ({why}); stopping the machine instead")
            self.hooks.begin(EndAction.STOP)
            plan = provider.plan(Action.STOP)
            self.announce(plan)
            action = Action.STOP
            outcome, refused = self.keep_trying(provider, action, False, True, share=1.0)
        if outcome is None:
            return self.kept(plan, f"{provider.name} refused the {action.value}: {refused}")
        if outcome.confirmed:
            summary = f"{action.value}: {provider.name} reports instance {outcome.instance} "
            summary += f"{outcome.state}"
            if action is Action.STOP:
                summary += f" ({provider.stop_bills})"
            self.say(f"finish: {summary}")
            return self.result(
                EndAction(action.value), True, plan, summary, provider=outcome.to_json()
            )
        self.loud(f"{provider.name}: the {action.value} is not confirmed: {outcome.detail}")
        return self.result(
            EndAction(action.value),
            False,
            plan,
            f"{action.value} requested, not confirmed",
            outcome.detail,
            provider=outcome.to_json(),
        )

    def keep_trying(
        self, provider: Provider, action: Action, resumed: bool, send: bool, share: float
    ) -> tuple[ProviderOutcome | None, str]:
        """(the outcome, or None when refused for good; the refusal). A destroy gets
        `share` of the time left, so a fallback stop still has its turn."""
        left = max(0.0, self.until - self.clock.time()) * share
        window = Window(self.clock.monotonic() + left, self.host.retry_base)
        try:
            if not send:
                instance = provider.identify()
                call = provider.describe_call(action, instance)
                within = min(left, provider.confirm_timeout)
                return provider.confirm(action, instance, call, within=within), ""
            return keep_ending(
                provider, action, window, resumed=resumed, on_attempt=self.hooks.attempt
            ), ""
        except Refused as exc:
            self.loud(f"{provider.name} refused the {action.value} for good: {exc}")
            self.hooks.refused(f"{provider.name} refused the {action.value} for good: {exc}")
            return None, str(exc)
        except ProviderError as exc:
            self.say(f"finish: {provider.name} failed: {exc}")
            return None, str(exc)


def apply_finish(
    finish: FinishSpec,
    ctx: FinishContext,
    *,
    verified: bool,
    dry_run: bool,
    clock: Clock = SYSTEM,
    log: Callable[[str], None] = print,
    host: FinishHost | None = None,
    resume: EndAction | None = None,
    decision: Decision | None = None,
    hooks: FinishHooks | None = None,
    until: float | None = None,
) -> FinishResult:
    """Apply the finish action (or, unverified, the `finish.unverified` choice); never raises
    for what the machine or the provider does: the result says what happened. `resume`: the
    action a previous process had begun (runspec.machine.endgame): it is confirmed, never repeated.
    `decision`: the one made for the message already (else it is made here, the same way);
    `until`: the wall-clock time a provider's end stops retrying."""
    host = host or FinishHost()
    if decision is None:
        decision = resolve(finish, verified, host, clock=clock, say=log, resume=resume)
    finisher = _Finisher(
        finish,
        ctx,
        decision,
        dry_run=dry_run,
        host=host,
        clock=clock,
        say=log,
        hooks=hooks or FinishHooks(),
        resume=resume,
        until=until,
    )
    result = finisher.run()
    logging.getLogger("runspec.machine.finish").info(
        "%s: finish %s -> %s (ok=%s, verified=%s, dry_run=%s): %s",
        ctx.name,
        result.requested,
        result.action,
        result.ok,
        decision.verified,
        dry_run,
        result.summary,
    )
    return result
