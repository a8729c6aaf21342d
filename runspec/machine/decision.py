"""The machine's end decided once: which action a finish takes, with the provider resolved.

`resolve` is the one place the choice is made (issue 20: the endgame and the finish each used to
decide, one without the provider, so `auto` on a provider that cannot stop announced a stop and
then destroyed). Its `Decision` goes, unchanged, to the message, the notification and the
action (runspec.machine.endgame, runspec.machine.finish).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runspec import cost
from runspec.clock import Clock
from runspec.machine.host import FinishHost
from runspec.providers import Provider, ProviderError, get_provider
from runspec.spec.model import FinishAction, FinishSpec, Unverified
from runspec.store.finishrecord import ENDS_BILLING, EndAction

ENDS_MACHINE = frozenset(
    {FinishAction.DESTROY, FinishAction.STOP, FinishAction.AUTO, FinishAction.POWEROFF}
)


@dataclass(frozen=True)
class Decision:
    """What the finish will do (none | keep | command | poweroff | stop | destroy), and why."""

    action: EndAction
    why: str
    verified: bool
    provider: Provider | None = None
    provider_error: str = ""
    unresolved_auto: bool = False  # auto with no provider to ask: nothing can be chosen

    @property
    def line(self) -> str:
        return f"finish: {self.action}"


def ends_machine(finish: FinishSpec, verified: bool) -> bool:
    """Whether this finish, as `decide` would resolve it, ends the machine's billing."""
    if finish.action is FinishAction.NONE:
        return False
    if not verified:
        return finish.unverified is not Unverified.KEEP
    return finish.action in ENDS_MACHINE


def decide(finish: FinishSpec, verified: bool, provider: str | None) -> tuple[EndAction, str]:
    """(action, why): the spec's action when verified, else the `unverified` choice."""
    action = finish.action
    if action is FinishAction.NONE:
        return EndAction.NONE, "finish.action is none"
    if not verified:
        choice = finish.unverified
        why = f"final push not verified: finish.unverified is {choice.value}"
        return EndAction(choice.value), why  # stop, keep or poweroff
    if action is FinishAction.AUTO:
        assert finish.storage is not None  # the loader's rule: auto needs storage
        choice_, why = cost.choose(finish.storage, provider)
        return EndAction(choice_.value), f"auto: {why}"
    return EndAction(action.value), f"final push verified: finish.action is {action.value}"


def _needs_provider(finish: FinishSpec, verified: bool, resume: EndAction | None) -> bool:
    if resume in ENDS_BILLING:
        return True
    if not verified:
        return finish.action is not FinishAction.NONE and finish.unverified is Unverified.STOP
    return finish.action in (FinishAction.STOP, FinishAction.DESTROY, FinishAction.AUTO)


def resolve(
    finish: FinishSpec,
    verified: bool,
    host: FinishHost,
    *,
    clock: Clock,
    say: Callable[[str], None],
    resume: EndAction | None = None,
) -> Decision:
    """The one decision: the provider found (once), then the action chosen knowing it.
    `resume`: an action begun before a restart, finished as begun, never chosen again."""
    provider: Provider | None = None
    error = ""
    if _needs_provider(finish, verified, resume):
        try:
            if host.provider is not None:
                provider = host.provider
            else:
                provider, how = get_provider(finish.provider, host.env, clock=clock)
                say(f"finish: provider {provider.name} ({how})")
        except ProviderError as exc:
            error = str(exc)
    name = provider.name if provider is not None else None
    if resume is not None:
        return Decision(
            resume, f"{resume} was requested before a restart", verified, provider, error
        )
    if finish.action is FinishAction.AUTO and verified and provider is None:
        why = f"cannot apply auto: {error}"
        return Decision(EndAction.KEEP, why, verified, None, error, True)
    action, why = decide(finish, verified, name)
    return Decision(action, why, verified, provider, error)
