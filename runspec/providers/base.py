"""What every provider adapter shares: a small HTTP client that never leaks a secret, and the
request-then-confirm flow of a stop or a destroy.

Each adapter says how it identifies the instance it runs on, what it is about to call (before it
calls it), and then polls, bounded, until the provider reports the instance going. Base URLs can
be moved by environment variables (`RUNSPEC_<PROVIDER>_...`) for the tests' local stand-ins only.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import urllib.error
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from runspec.clock import SYSTEM, Clock
from runspec.errors import RunspecError
from runspec.providers.answers import TRANSIENT_CODES, said

log = logging.getLogger("runspec.providers")

REDACTED = "<redacted>"
# 408 timeout, 409 conflict, 423 locked (Hetzner: an action already runs on the server),
# 425 too early, 429 slow down: each says "again later", not "no".
TRANSIENT_4XX = frozenset({408, 409, 423, 425, 429})


class ProviderError(RunspecError):
    """The provider could not be identified or refused or failed a request.

    `status`: the HTTP status of a refused request; `retry_after`: the seconds its Retry-After
    asked for; `timed_out`: no answer came, so the request may or may not have taken effect."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        timed_out: bool = False,
        code: str | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message)
        self.fix = fix  # what to do, where the cause is known better than "check the setup"
        self.status = status
        self.retry_after = retry_after
        self.timed_out = timed_out
        self.code = code  # the provider's own error code, when its body gave one

    @property
    def permanent(self) -> bool:
        """A refusal that asking again cannot change (bad credentials, no such instance).
        423 and the codes that say "an action is running" or "slow down" are not."""
        if self.code in TRANSIENT_CODES:
            return False
        status = self.status
        return status is not None and 400 <= status < 500 and status not in TRANSIENT_4XX


def retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the delta form; an HTTP date is read as no advice)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < 86400 else None


class Action(str, enum.Enum):
    STOP = "stop"
    DESTROY = "destroy"


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    retry_after: float | None = None

    def json(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except ValueError as exc:
            raise ProviderError(
                f"the provider answered with something that is not JSON: {exc}"
            ) from exc

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


class Http:
    """urllib with a timeout per request and errors that name the request, never a secret."""

    def __init__(self, timeout: float = 15.0, secrets: tuple[str, ...] = ()) -> None:
        self.timeout = timeout
        self.secrets = [s for s in secrets if s]

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        json_body: Any = None,
        ok: tuple[int, ...] = (200, 201, 202, 204),
        timeout: float | None = None,
    ) -> Response:
        """One request; raises ProviderError unless the status is in `ok`."""
        all_headers = {"User-Agent": "runspec", "Accept": "application/json", **(headers or {})}
        if json_body is not None:
            body = json.dumps(json_body).encode()
            all_headers.setdefault("Content-Type", "application/json")
        # urllib.request brings http.client, email and ssl: loaded with the first provider call,
        # not with the daemon, which reads the registry at start (bench/bench_daemon.py).
        from urllib.request import Request, urlopen  # noqa: PLC0415

        req = Request(url, data=body, headers=all_headers, method=method)
        where = f"{method} {self.redact(url)}"
        try:
            with urlopen(req, timeout=timeout or self.timeout) as resp:
                response = Response(resp.status, resp.read())
        except urllib.error.HTTPError as exc:
            after = retry_after(exc.headers.get("Retry-After") if exc.headers else None)
            response = Response(exc.code, exc.read() if exc.fp else b"", after)
        except TimeoutError as exc:
            raise ProviderError(
                f"{where}: no answer within {timeout or self.timeout:g} s", timed_out=True
            ) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise ProviderError(
                    f"{where}: no answer within {timeout or self.timeout:g} s", timed_out=True
                ) from exc
            reason = self.redact(str(exc.reason))
            raise ProviderError(f"{where}: cannot reach the provider ({reason})") from exc
        except OSError as exc:
            raise ProviderError(f"{where}: {self.redact(str(exc))}") from exc
        if response.status not in ok:
            refusal = said(response.body)
            raise ProviderError(
                f"{where}: HTTP {response.status}: {self.redact(refusal.text)}",
                status=response.status,
                retry_after=response.retry_after,
                code=refusal.code,
            )
        return response


@dataclass(frozen=True)
class ProviderOutcome:
    provider: str
    action: str
    instance: str
    call: str  # what was called, as printed before calling it
    confirmed: bool  # a poll saw the instance going (or gone)
    state: str | None  # the last state the provider reported
    detail: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


GONE = "gone"  # what `state()` returns when the provider no longer knows the instance


class Provider:
    name: ClassVar[str] = ""
    can_stop: ClassVar[bool] = True
    stop_bills: ClassVar[str] = "the disk"  # what a stopped instance still bills
    # States that mean the request took effect (the instance is going or gone).
    going_after: ClassVar[dict[Action, frozenset[str]]] = {}

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        clock: Clock = SYSTEM,
        timeout: float = 15.0,
        confirm_timeout: float = 120.0,
        poll_interval: float = 3.0,
    ) -> None:
        self.env = dict(os.environ if env is None else env)
        self.clock = clock
        self.confirm_timeout = confirm_timeout
        self.poll_interval = poll_interval
        self.http = Http(timeout=timeout, secrets=self.secrets())

    # The environment variables that hold this provider's secrets. The finish alone reads them:
    # no child of the daemon (preflight, trainer) gets them (runspec.secrets.secretenv builds its
    # deny list from every adapter's tuple, so a new adapter cannot be forgotten there).
    secret_env: ClassVar[tuple[str, ...]] = ()

    def _var(self, name: str) -> str | None:
        return self.env.get(name)

    # What each adapter provides.
    def secrets(self) -> tuple[str, ...]:
        """Values that must never appear in a log line or an error."""
        return tuple(value for name in self.secret_env if (value := self._var(name)))

    def identify(self) -> str:
        """The instance this process runs on; raises ProviderError when it cannot tell."""
        raise NotImplementedError

    def how_identified(self) -> str:
        raise NotImplementedError

    def describe_call(self, action: Action, instance: str) -> str:
        """The exact request about to be made, without secrets."""
        raise NotImplementedError

    def call(self, action: Action, instance: str) -> None:
        raise NotImplementedError

    def state(self, instance: str) -> str:
        """The provider's word for the instance's state, or GONE."""
        raise NotImplementedError

    def prove(self, actions: tuple[Action, ...], instance: str) -> str:
        """What can be proven, without acting, of the key's right to do `actions`: a sentence.
        Raises ProviderError when the provider says it may not. This default is for the APIs
        with no dry run: a read proves the key reads, nothing more."""
        verbs = " or ".join(a.value for a in actions)
        return (
            f"the key can read instance {instance}; whether it may {verbs} it is known only at "
            f"the end ({self.name}'s API cannot check a permission without acting: the README's "
            "Providers says how to make a key that may)"
        )

    # The shared flow.
    def check(self, actions: tuple[Action, ...] = ()) -> str:
        """Proof, changing nothing, that this adapter can end this machine: the instance is
        identified, the credentials work, the provider reports the instance's state, and
        (where its API can say so without acting) the key may do `actions`. Raises
        ProviderError naming what is missing."""
        instance = self.identify()
        state = self.state(instance)
        if state == GONE:
            raise ProviderError(f"{self.name}: the provider does not know instance {instance}")
        found = f"{self.name} instance {instance} ({self.how_identified()}) reads {state!r}"
        return f"{found}; {self.prove(actions, instance)}" if actions else found

    def plan(self, action: Action) -> str:
        instance = self.identify()
        return f"{self.name}: {action.value} instance {instance} ({self.how_identified()}): " + (
            self.describe_call(action, instance)
        )

    def apply(self, action: Action) -> ProviderOutcome:
        if action is Action.STOP and not self.can_stop:
            raise ProviderError(f"{self.name} cannot stop an instance ({self.stop_bills})")
        instance = self.identify()
        call = self.describe_call(action, instance)
        log.info("%s: %s instance %s: %s", self.name, action.value, instance, call)
        self.call(action, instance)
        return self.confirm(action, instance, call)

    def resume(self, action: Action) -> ProviderOutcome:
        """After a restart, an action requested before it: confirmed, not requested again.
        Only when the provider shows no sign of it for a whole confirmation wait (the request
        never left this machine) is it made once more: stop and destroy are idempotent there."""
        instance = self.identify()
        call = self.describe_call(action, instance)
        log.info("%s: confirming the %s requested before a restart", self.name, action.value)
        outcome = self.confirm(action, instance, call)
        if outcome.confirmed:
            return outcome
        log.warning(
            "%s: no sign of the %s requested before the restart: requesting it",
            self.name,
            action.value,
        )
        self.call(action, instance)
        return self.confirm(action, instance, call)

    def confirm_only(self, action: Action) -> ProviderOutcome:
        """Poll for an action requested before a restart; request nothing."""
        instance = self.identify()
        return self.confirm(action, instance, self.describe_call(action, instance))

    def going(self, action: Action) -> frozenset[str]:
        """The states that show `action` took effect."""
        return self.going_after.get(action, frozenset()) | {GONE}

    def confirm(
        self, action: Action, instance: str, call: str, within: float | None = None
    ) -> ProviderOutcome:
        """Poll until the instance is going, for at most `within` (confirm_timeout) seconds."""
        going = self.going(action)
        wait = self.confirm_timeout if within is None else max(0.0, within)
        deadline = self.clock.monotonic() + wait
        last: str | None = None
        last_error = ""
        while True:
            try:
                last = self.state(instance)
                last_error = ""
            except ProviderError as exc:
                last_error = str(exc)
            if last in going:
                return ProviderOutcome(self.name, action.value, instance, call, True, last, "")
            if self.clock.monotonic() >= deadline:
                break
            self.clock.sleep(min(self.poll_interval, max(0.0, deadline - self.clock.monotonic())))
        detail = f"requested, but after {wait:g} s the provider still reports {last!r}" + (
            f" (last poll failed: {last_error})" if last_error else ""
        )
        return ProviderOutcome(self.name, action.value, instance, call, False, last, detail)


def env_or_file(env: Mapping[str, str], name: str, environ_file: str) -> str | None:
    """A variable from this process's environment, else from PID 1's (`/proc/1/environ`).

    Providers put their variables in the container's init environment; a login shell or a
    systemd service started later does not always inherit them.
    """
    value = env.get(name)
    if value:
        return value
    try:
        raw = Path(environ_file).read_bytes()
    except OSError:
        return None
    for entry in raw.split(b"\0"):
        key, sep, val = entry.partition(b"=")
        if sep and key.decode(errors="replace") == name:
            return val.decode(errors="replace") or None
    return None


def not_on(what: str, instance: str, var: str) -> str:
    """The fix when the instance variable a provider sets in each of its machines is missing:
    this machine is not one of them (a key in /etc/runspec/env would not help)."""
    return (
        f"this machine is not {what} (the provider sets {var} in each): run the spec on a "
        f"{instance}, name this machine's provider in finish.provider, or choose another finish"
    )
