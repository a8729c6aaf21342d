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
from runspec.providers.base import GONE, Action, Provider, ProviderError
from runspec.providers.detect import PROVIDERS
from runspec.providers.persist import Refused, Window, keep_ending
from runspec.push.base import one_line
from runspec.watch.endedby import confirm_end
from runspec.watch.endseen import see_end
from runspec.watch.judge import Verdict, WatchDecision, judge
from runspec.watch.lease import (
    LEASE_PATH,
    DamagedLease,
    HubLease,
    Lease,
    LeaseError,
    LeaseMoved,
)
from runspec.watch.leasefields import AWS_REGION, MAX_TEXT
from runspec.watch.liveness import Reading, on_hub_clock, read_live, skew_refusal
from runspec.watch.seal import KEY_VARIABLE
from runspec.watch.weightsread import unread_weights

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
            found = region or self.env.get("AWS_REGION") or self.env.get("AWS_DEFAULT_REGION")
            # A region names the host the signed requests go to: a region name, never a host.
            if not found or not AWS_REGION.match(found):
                raise ProviderError(f"{found!r} is not an AWS region name (like us-east-1)")
            return found

    provider: Provider = Pinned(
        environ,
        clock=clock,
        confirm_timeout=opts.confirm_timeout,
        poll_interval=opts.poll_interval,
    )
    return provider


Read = Reading  # the lease at the head and the Hub's newest commits (runspec.watch.liveness)


def claim(lease: Lease | None) -> tuple[str, str] | None:
    """The instance a proven lease of a live run claims; None for any other lease."""
    if lease is None or not lease.proven or lease.final or not lease.instance:
        return None
    return (lease.provider or "", lease.instance)


def watch_repo(
    repo: str,
    opts: WatchOptions,
    *,
    env: Mapping[str, str] | None = None,
    clock: Clock = SYSTEM,
    hub: HubLease | None = None,
    contested: frozenset[tuple[str, str]] = frozenset(),
    first: Read | LeaseError | None = None,
) -> Seen:
    """`first`: the lease as this pass read it already (or why it could not)."""
    hub = hub or HubLease(repo)
    for _ in range(3):  # a branch that moved under the decision: read and judge again
        try:
            found = first if first is not None else _read(hub, clock)
            first = None
            environ = dict(os.environ if env is None else env)
            return _once(repo, hub, found, opts, environ, clock, contested)
        except LeaseMoved:
            log.info("%s moved while its lease was judged: reading it again", repo)
    return Seen(repo, "error", "", error=f"{repo} kept moving while its lease was judged")


def _read(hub: HubLease, clock: Clock = SYSTEM) -> Read | LeaseError:
    try:
        return read_live(hub.repo, hub, clock)
    except LeaseError as exc:
        return exc
    except Exception as exc:  # a hostile file that breaks the reader: this repo's fault only
        log.exception("%s: reading its lease failed", hub.repo)
        return LeaseError(f"{hub.repo}: its lease broke the reader: {one_line(exc)}")


def read_lease(repo: str, clock: Clock = SYSTEM) -> Read | LeaseError:
    return _read(HubLease(repo), clock)


def _unproven(key: str | None) -> str:
    if not key:
        return (
            f"{KEY_VARIABLE} is not set here, so no lease can be proven: nothing called "
            "(set it to the watch key in the boxes' /etc/runspec/env)"
        )
    return (
        f"its lease is not sealed for this repo with {KEY_VARIABLE}: nothing called (written "
        "by a box without the key, or by someone else than the run it names)"
    )


def _once(
    repo: str,
    hub: HubLease,
    found: Read | LeaseError,
    opts: WatchOptions,
    env: dict[str, str],
    clock: Clock,
    contested: frozenset[tuple[str, str]],
) -> Seen:
    if isinstance(found, DamagedLease):
        return Seen(repo, "error", "", error=f"damaged lease: {found}")
    if isinstance(found, LeaseError):
        return Seen(repo, "error", "", error=str(found))
    head, lease = found.head, found.lease
    if head is None or lease is None or found.page is None:
        return Seen(repo, "no-lease", f"no {LEASE_PATH} (watch.lease: none, or not pushed)")
    if not lease.proven:
        return Seen(repo, "unproven", "", error=_unproven(env.get(KEY_VARIABLE)))
    if (mine := claim(lease)) is not None and mine in contested:
        reason = f"{mine[0]} instance {mine[1]} is claimed by another repo's lease too"
        return Seen(repo, "error", "", error=f"{reason}: ended by neither")
    # Judged on the Hub's clock, never on this watcher's (runspec.watch.liveness).
    if (refusal := skew_refusal(found.page, lease)) is not None:
        return Seen(repo, "error", "", error=refusal)
    on_hub, now = on_hub_clock(lease, found.page)
    grace = (lease.lease_s if opts.grace is None else opts.grace) + found.failing_s
    decision = judge(
        on_hub, now, grace=grace, destroy_unverified_after=opts.destroy_unverified_after
    )
    if decision.verdict is Verdict.NOTIFY:
        return Seen(repo, decision.verdict.value, decision.reason, error=decision.reason)
    if lease.final and not opts.dry_run:  # its own end, confirmed where the box could not
        see_end(hub, head, lease, lambda: pinned(lease, env, opts, clock), clock)
    if not decision.acts or opts.dry_run:
        action = decision.action.value if decision.action else None
        verdict = "would-end" if decision.acts else decision.verdict.value
        return Seen(repo, verdict, decision.reason, action, grace_added=found.failing_s)
    seen = _end(repo, hub, head, lease, decision, opts, env, clock)
    seen.grace_added = found.failing_s
    return seen


def _bounded(ended_by: dict[str, Any]) -> dict[str, Any]:
    """`ended_by` as a lease may hold it (runspec.watch.leasefields): a provider's long answer
    cut, so the watcher's own record never reads back as a damaged lease."""
    return {k: v[:MAX_TEXT] if isinstance(v, str) else v for k, v in ended_by.items()}


def _end(
    repo: str,
    hub: HubLease,
    head: str,
    lease: Lease,
    decision: WatchDecision,
    opts: WatchOptions,
    env: dict[str, str],
    clock: Clock,
) -> Seen:
    assert decision.action is not None
    action = decision.action
    if action is Action.DESTROY and lease.final_verified:
        # A lease alone never turns a stop into a destroy: the watcher reads the weights back.
        unread = unread_weights(repo, head, lease.final_weights)
        if unread is not None:
            unverified = replace(lease, final_verified=False)
            decision = judge(
                unverified,
                clock.time(),
                grace=opts.grace,
                destroy_unverified_after=opts.destroy_unverified_after,
            )
            reason = f"{decision.reason}; the lease says the final push verified, but {unread}"
            if decision.action is None:
                return Seen(repo, "notify", reason, error=reason)
            action = decision.action
            decision = replace(decision, reason=reason)
    seen = Seen(repo, decision.verdict.value, decision.reason, action.value)
    try:
        provider = pinned(lease, env, opts, clock)
        state = provider.state(provider.identify())  # it answers, before anything is decided
    except ProviderError as exc:
        seen.error = f"the provider did not answer a read of the instance: {exc}"
        return seen
    ended_by = {
        "by": "watch",
        "reason": decision.reason,
        "action": action.value,
        "at": utc_iso(clock.time()),
        "confirmed": False,
        "watcher": socket.gethostname(),
        # Unique per claim: huggingface_hub skips a commit whose files are unchanged, so two
        # watchers writing the same words in the same second would both seem to have won.
        "claim": secrets.token_hex(8),
    }
    claimed = replace(lease, ended_by=_bounded(ended_by))
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
    done = _bounded({**ended_by, "confirmed": seen.confirmed, "detail": detail, "claim_s": claim_s})
    try:
        hub.write(replace(lease, ended_by=done), commit, f"runspec watch: {action.value} recorded")
    except LeaseError as exc:  # the end stands; the first write already names it
        log.warning("%s: the end's outcome was not recorded: %s", repo, exc)
    if seen.confirmed:  # beside the receipt, as the box adds an end it saw confirmed
        confirm_end(hub, lease, action.value, detail, clock.time())
    return seen
