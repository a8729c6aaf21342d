"""Whether a box still lives, read so that a flaky Hub cannot fake its death.

- **The Hub's clock.** The box vouched for itself until its newest commit's time on the Hub
  plus the span its lease vouches for (`vouched_until - renewed_at`, at most two leases): any
  commit of the box counts (a renewal, a push, its card), and the box's own clock does not
  enter. "Now" is the `Date` of the Hub's answer (runspec.watch.hubclock).
- **A watcher whose clock is off refuses.** Its clock and the Hub's may differ by a quarter of
  the lease (at least 2 s: the Date header is whole seconds); beyond that it judges nothing
  and says so, whatever the lease says.
- **Time spent failing is grace.** A read is tried again with backoff (honouring Retry-After)
  for up to a minute; the longest time a watcher spent failing to read a repo without a break,
  in this pass or across the passes before, is added to its grace until the box commits again:
  the box was meeting the same Hub meanwhile. The longest outage, not the sum of every short
  one: a Hub failing a share of requests costs the box retries, an outage costs it renewals.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace

from runspec.backoff import pause_after
from runspec.clock import Clock, human_duration, parse_utc_iso, utc_iso
from runspec.watch.hubclock import HubPage, newest_commits, retry_after
from runspec.watch.lease import VOUCH_LEASES, DamagedLease, HubLease, Lease, LeaseError
from runspec.watch.memory import MEMORY, Memory

log = logging.getLogger("runspec.watch")

SKEW_SHARE = 0.25  # of the lease: the most a watcher's clock may differ from the Hub's
SKEW_FLOOR_S = 2.0
READ_PATIENCE_S = 60.0  # how long one pass tries to read a repo
READ_FIRST_PAUSE_S = 1.0
READ_MOST_PAUSE_S = 8.0


@dataclass(frozen=True)
class Reading:
    head: str | None
    lease: Lease | None
    page: HubPage | None
    failing_s: float  # the grace this watcher adds: the time it spent failing to read


def read_live(
    repo: str,
    hub: HubLease,
    clock: Clock,
    memory: Memory = MEMORY,
    patience: float = READ_PATIENCE_S,
) -> Reading:
    """The lease at the head and the Hub's newest commits, tried again with backoff for up
    to `patience`; raises DamagedLease at once, LeaseError once the patience is spent."""
    until = clock.monotonic() + patience
    failures = 0
    while True:
        began = clock.time()  # a read that fails takes its time to: the outage began here
        try:
            head, lease = hub.read()
            page = newest_commits(repo, clock) if head is not None else None
        except DamagedLease:
            raise
        except LeaseError as exc:
            memory.failed(repo, began)
            failures += 1
            backoff = pause_after(failures, READ_FIRST_PAUSE_S, READ_MOST_PAUSE_S)
            pause = max(backoff, retry_after(exc) or 0.0)
            if clock.monotonic() + pause > until:
                raise
            log.info("%s: unreadable (%s); again in %.0f s", repo, exc, pause)
            clock.sleep(pause)
            continue
        box = page.newest_of_box() if page is not None else None
        owed = memory.cleared(repo, clock.time(), box.sha if box else None)
        return Reading(head, lease, page, owed)


def skew_refusal(page: HubPage, lease: Lease) -> str | None:
    """Why this watcher may not judge on its clock; None when it agrees with the Hub's."""
    limit = max(SKEW_SHARE * lease.lease_s, SKEW_FLOOR_S)
    skew = page.skew - 0.5  # the Date header's whole second, taken at its middle
    if abs(skew) <= limit:
        return None
    way = "ahead of" if skew > 0 else "behind"
    return (
        f"this watcher's clock is {human_duration(abs(skew))} {way} the Hub's (its Date "
        f"header), more than a quarter of the lease ({human_duration(limit)}): it ends nothing "
        "until its clock is set (NTP)"
    )


def on_hub_clock(lease: Lease, page: HubPage) -> tuple[Lease, float]:
    """(the lease with `vouched_until` on the Hub's clock, the Hub's now)."""
    newest = page.newest_of_box()
    if newest is None:  # nothing of the box on the first page: its lease's own word
        return lease, page.hub_now
    vouched = lease.vouched_ts - parse_utc_iso(lease.renewed_at)
    span = min(max(vouched, 0.0), VOUCH_LEASES * lease.lease_s)
    return replace(lease, vouched_until=utc_iso(math.ceil(newest.at + span))), page.hub_now
