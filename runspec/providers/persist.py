"""The machine's end keeps trying: a stop or a destroy requested until the provider's own word
for the instance's state confirms it, or the window the caller gives runs out.

One failed call is the common case, not the end (a 500, a 429, a hang, a "gone" that does not
come yet), so each is retried with backoff, honouring Retry-After. Whenever a request may have
gone out without its answer (a timeout, a 5xx after the provider acted, a restart mid-request)
the instance's state is read before anything is sent again: a destroy that worked is reported
as done and never requested twice. A refusal that asking again cannot change (401, 403, a 404
on an instance the state read still shows) is raised at once as `Refused`.

Every attempt is handed to `on_attempt` before the next one, so the caller (runspec.machine.endgame)
records it and a restart goes on from the last one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass

from runspec.clock import utc_iso
from runspec.providers.base import Action, Provider, ProviderError, ProviderOutcome

log = logging.getLogger("runspec.providers")

RETRY_BASE = 5.0
RETRY_MAX = 120.0


class Refused(ProviderError):
    """The provider refused for good: asking again cannot change its answer."""


@dataclass(frozen=True)
class Attempt:
    """One request (or one read of the state instead of a request), as the endgame records it."""

    action: str
    time: str
    sent: bool  # a request went out (False: the state was read, nothing was sent)
    answer: str  # "accepted", or the error the request met
    state: str | None  # the provider's word for the instance right after
    confirmed: bool

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Window:
    """How long to keep trying (monotonic end) and how fast to back off."""

    until: float
    base: float = RETRY_BASE
    most: float = RETRY_MAX


class _Ender:
    """One stop or destroy being pursued: the instance, the call, and each attempt said."""

    def __init__(
        self,
        provider: Provider,
        action: Action,
        window: Window,
        on_attempt: Callable[[Attempt], None],
    ) -> None:
        self.provider = provider
        self.action = action
        self.window = window
        self.on_attempt = on_attempt
        self.instance = provider.identify()
        self.call = provider.describe_call(action, self.instance)
        self.state: str | None = None

    def outcome(self, confirmed: bool, detail: str = "") -> ProviderOutcome:
        p = self.provider
        return ProviderOutcome(
            p.name, self.action.value, self.instance, self.call, confirmed, self.state, detail
        )

    def said(self, sent: bool, answer: str, confirmed: bool) -> bool:
        now = utc_iso(self.provider.clock.time())
        self.on_attempt(Attempt(self.action.value, now, sent, answer, self.state, confirmed))
        return confirmed

    def read(self) -> bool:
        """One read of the state: whether it shows the action took effect."""
        try:
            self.state = self.provider.state(self.instance)
        except ProviderError:
            self.state = None
            return False
        return self.state in self.provider.going(self.action)

    def watch(self) -> bool:
        """Poll the state for one confirmation's time (never past the window)."""
        p = self.provider
        left = max(0.0, min(p.confirm_timeout, self.window.until - p.clock.monotonic()))
        outcome = p.confirm(self.action, self.instance, self.call, within=left)
        self.state = outcome.state
        return outcome.confirmed

    def send(self) -> tuple[bool, float | None, str]:
        """One request and what it showed: (confirmed, the pause it asks for, its error)."""
        p = self.provider
        log.info("%s: %s instance %s: %s", p.name, self.action.value, self.instance, self.call)
        try:
            p.call(self.action, self.instance)
        except ProviderError as exc:
            error = str(exc)
            if exc.permanent:
                # A 404 on a DELETE may mean it is gone already: the state read says.
                if self.said(True, error, self.read()):
                    return True, None, ""
                raise Refused(error, status=exc.status) from exc
            if exc.timed_out:
                # It may have worked: the state is watched before anything is sent again.
                return self.said(True, error, self.watch()), None, error
            # A 5xx or a 429 may still have acted: one read before the pause.
            return self.said(True, error, self.read()), exc.retry_after, error
        return self.said(True, "accepted", self.watch()), None, ""


def keep_ending(
    provider: Provider,
    action: Action,
    window: Window,
    *,
    resumed: bool = False,
    on_attempt: Callable[[Attempt], None] = lambda attempt: None,
) -> ProviderOutcome:
    """Request `action` until confirmed or `window.until`; raises Refused for a permanent no
    (and ProviderError when the instance cannot be identified)."""
    ender = _Ender(provider, action, window, on_attempt)
    clock = provider.clock
    # Requested before a restart: watched for a whole confirmation first, and sent anew only
    # when the provider shows no sign of it (the request never left this machine).
    if resumed and ender.said(False, "watched", ender.watch()):
        return ender.outcome(True)
    delay = window.base
    while True:
        confirmed, asked, error = ender.send()
        if confirmed:
            return ender.outcome(True)
        wait = max(delay, asked or 0.0)
        if window.until - clock.monotonic() <= wait:
            last = f"the last request failed: {error}" if error else ""
            why = last or f"the provider still reports {ender.state!r}"
            return ender.outcome(False, f"not confirmed before the end's window ran out; {why}")
        log.warning("%s: %s not confirmed yet; again in %.0f s", provider.name, action.value, wait)
        clock.sleep(wait)
        delay = min(delay * 2, window.most)
