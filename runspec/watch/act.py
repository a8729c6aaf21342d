"""A watcher's pass over one repo: read the lease, judge it, and end the box once.

Fail closed: a Hub that cannot be read, a damaged lease, a provider that does not answer the
read of the instance's state (asked before anything is sent) each mean no provider call, an
error the caller notifies, and a non-zero exit. Once: the decision goes into the lease through
the Hub's optimistic lock before the provider is called; a watcher that loses that race reads
the lease again and finds the other's `ended_by`. The end is then pursued and confirmed as the
box's own finish does it (runspec.providers.persist), and the outcome recorded in the lease.

The provider is the one the lease names, addressed by the lease's instance id, with the keys
in the watcher's own environment (`VAST_API_KEY` or `CONTAINER_API_KEY`, `RUNPOD_API_KEY`,
`LAMBDA_API_KEY`, `HCLOUD_TOKEN`, `AWS_*`, ...): nothing is read from this machine's own
identity (its PID 1 environment, its metadata server).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from runspec.clock import SYSTEM, Clock, utc_iso
from runspec.providers.base import GONE, Provider, ProviderError
from runspec.providers.detect import PROVIDERS
from runspec.providers.persist import Refused, Window, keep_ending
from runspec.watch.judge import Decision, Verdict, judge
from runspec.watch.lease import (
    LEASE_PATH,
    DamagedLease,
    HubLease,
    Lease,
    LeaseError,
    LeaseMoved,
)
from runspec.watch.liveness import on_hub_clock, read_live, skew_refusal

log = logging.getLogger("runspec.watch")

# The watcher's names for keys that the box's own environment spells otherwise.
KEY_ALIASES = {"VAST_API_KEY": "CONTAINER_API_KEY"}


@dataclass(frozen=True)
class WatchOptions:
    grace: float | None = None  # None: one lease
    destroy_unverified_after: float | None = None
    dry_run: bool = False
    within: float = 600.0  # how long an end is pursued before it is reported unconfirmed
    confirm_timeout: float = 120.0
    poll_interval: float = 3.0


@dataclass
class Seen:
    """What the watcher found and did for one repo (one line of its report)."""

    repo: str
    verdict: str
    reason: str
    action: str | None = None
    called: bool = False  # a request went to the provider
    confirmed: bool | None = None
    error: str | None = None  # set: fail closed (nothing was called), or the end failed
    grace_added: float = 0.0  # the longest time this watcher failed to read the repo

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def pinned(lease: Lease, env: Mapping[str, str], opts: WatchOptions, clock: Clock) -> Provider:
    """The lease's provider adapter, addressing the lease's instance with this environment's
    keys; raises ProviderError for an unknown provider."""
    cls = PROVIDERS.get(lease.provider or "")
    if cls is None or lease.instance is None:
        raise ProviderError(f"the lease names no instance of a known provider ({lease.provider})")
    instance, region = lease.instance, lease.region
    environ = dict(env)
    for alias, name in KEY_ALIASES.items():
        if environ.get(alias) and not environ.get(name):
            environ[name] = environ[alias]

    class Pinned(cls):  # type: ignore[valid-type,misc]
        def identify(self) -> str:
            return instance

        def how_identified(self) -> str:
            return "the run's lease"

        def _var(self, name: str) -> str | None:
            return self.env.get(name)  # never this machine's PID 1 environment

        def region(self) -> str:
            return region or self.env.get("AWS_REGION") or self.env.get("AWS_DEFAULT_REGION") or ""

    provider: Provider = Pinned(
        environ, clock=clock, confirm_timeout=opts.confirm_timeout,
        poll_interval=opts.poll_interval,
    )  # fmt: skip
    return provider


def watch_repo(
    repo: str,
    opts: WatchOptions,
    *,
    env: Mapping[str, str] | None = None,
    clock: Clock = SYSTEM,
    hub: HubLease | None = None,
) -> Seen:
    hub = hub or HubLease(repo)
    for _ in range(3):  # a branch that moved under the decision: read and judge again
        try:
            return _once(repo, hub, opts, dict(os.environ if env is None else env), clock)
        except LeaseMoved:
            log.info("%s moved while its lease was judged: reading it again", repo)
    return Seen(repo, "error", "", error=f"{repo} kept moving while its lease was judged")


def _once(repo: str, hub: HubLease, opts: WatchOptions, env: dict[str, str], clock: Clock) -> Seen:
    try:
        reading = read_live(repo, hub, clock)
    except DamagedLease as exc:
        return Seen(repo, "error", "", error=f"damaged lease: {exc}")
    except LeaseError as exc:
        return Seen(repo, "error", "", error=str(exc))
    head, lease = reading.head, reading.lease
    if head is None or lease is None or reading.page is None:
        return Seen(repo, "no-lease", f"no {LEASE_PATH} (watch.lease: none, or not pushed)")
    # Judged on the Hub's clock, never on this watcher's (runspec.watch.liveness).
    if (refusal := skew_refusal(reading.page, lease)) is not None:
        return Seen(repo, "error", "", error=refusal)
    on_hub, now = on_hub_clock(lease, reading.page)
    grace = (lease.lease_s if opts.grace is None else opts.grace) + reading.failing_s
    decision = judge(
        on_hub, now, grace=grace, destroy_unverified_after=opts.destroy_unverified_after
    )
    if decision.verdict is Verdict.NOTIFY:
        return Seen(repo, decision.verdict.value, decision.reason, error=decision.reason)
    if not decision.acts or opts.dry_run:
        action = decision.action.value if decision.action else None
        verdict = "would-end" if decision.acts else decision.verdict.value
        return Seen(repo, verdict, decision.reason, action, grace_added=reading.failing_s)
    seen = _end(repo, hub, head, lease, decision, opts, env, clock)
    seen.grace_added = reading.failing_s
    return seen


def _end(
    repo: str, hub: HubLease, head: str, lease: Lease, decision: Decision, opts: WatchOptions,
    env: dict[str, str], clock: Clock,
) -> Seen:  # fmt: skip
    assert decision.action is not None
    action = decision.action
    seen = Seen(repo, decision.verdict.value, decision.reason, action.value)
    try:
        provider = pinned(lease, env, opts, clock)
        state = provider.state(provider.identify())  # it answers, before anything is decided
    except ProviderError as exc:
        seen.error = f"the provider did not answer a read of the instance: {exc}"
        return seen
    ended_by = {
        "by": "watch", "reason": decision.reason, "action": action.value,
        "at": utc_iso(clock.time()), "confirmed": False, "watcher": socket.gethostname(),
        # Unique per claim: huggingface_hub skips a commit whose files are unchanged, so two
        # watchers writing the same words in the same second would both seem to have won.
        "claim": secrets.token_hex(8),
    }  # fmt: skip
    claimed = replace(lease, ended_by=ended_by)
    # The claim lands before the provider is called. huggingface_hub retries the commit's
    # preupload request itself on a 429 or 5xx (1, 2, 4, 8, 8 s and any Retry-After): on a
    # failing Hub that is the seconds between `at` (the decision) and the call; recorded.
    began = clock.monotonic()
    try:
        commit = hub.write(claimed, head, f"runspec watch: {action.value} ({decision.reason})")
        claim_s = round(clock.monotonic() - began, 1)
    except LeaseMoved:
        raise
    except LeaseError as exc:
        seen.error = f"the decision could not be written to the lease: {exc}"
        return seen
    if state in provider.going(action) or state == GONE:
        seen.confirmed, detail = True, f"already {state}"
    else:
        seen.called = True
        window = Window(until=clock.monotonic() + opts.within)
        try:
            outcome = keep_ending(provider, action, window)
            seen.confirmed, detail = outcome.confirmed, outcome.detail or str(outcome.state)
        except (Refused, ProviderError) as exc:
            seen.confirmed, detail = False, str(exc)
    if not seen.confirmed:
        seen.error = f"{action.value} not confirmed: {detail}"
    done = {**ended_by, "confirmed": seen.confirmed, "detail": detail, "claim_s": claim_s}
    try:
        hub.write(replace(lease, ended_by=done), commit, f"runspec watch: {action.value} recorded")
    except LeaseError as exc:  # the end stands; the first write already names it
        log.warning("%s: the end's outcome was not recorded: %s", repo, exc)
    return seen
