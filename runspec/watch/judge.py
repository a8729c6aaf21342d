"""What a watcher makes of one lease, as a pure function of the lease, the time and its options.

A box is ended when its lease expired more than a grace ago (default: one lease) or its
deadline plus overrun passed without a final state. How: destroy only when the lease proves the
box holds nothing unverified (its final push verified); otherwise stop where the provider can
stop (the disk stays); where it cannot (Lambda, Hetzner) notify and do nothing, unless the user
allowed a destroy of unverified weights after a time (`--destroy-unverified-after`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from runspec.clock import human_duration, utc_iso
from runspec.providers.base import Action
from runspec.providers.detect import PROVIDERS
from runspec.watch.lease import Lease


class Verdict(str, enum.Enum):
    ALIVE = "alive"  # the lease holds: left alone
    FINAL = "final"  # the run reached its final state: nothing to guard
    ENDED = "ended"  # a watcher ended it already (the lease says so)
    END = "end"  # end the box with `action`
    NOTIFY = "notify"  # it should end, and cannot be ended safely: a word to people only


@dataclass(frozen=True)
class WatchDecision:
    verdict: Verdict
    reason: str
    action: Action | None = None

    @property
    def acts(self) -> bool:
        return self.verdict is Verdict.END


def judge(
    lease: Lease,
    now: float,
    *,
    grace: float | None = None,
    destroy_unverified_after: float | None = None,
) -> WatchDecision:
    if lease.ended_by is not None:
        by = lease.ended_by
        return WatchDecision(
            Verdict.ENDED, f"{by.get('action')} by {by.get('by')} at {by.get('at')}"
        )
    if lease.final:
        return WatchDecision(Verdict.FINAL, f"finished ({lease.state})")
    if lease.renewed_ts > now + lease.lease_s:  # a box's clock that far ahead is no clock
        return WatchDecision(Verdict.NOTIFY, f"renewed in the future ({lease.renewed_at})")
    wait = lease.lease_s if grace is None else grace
    expired_at = lease.vouched_ts
    deadline = lease.deadline_ts
    if now >= expired_at + wait:
        overdue = now - expired_at
        reason = f"lease expired at {lease.vouched_until}"
    elif deadline is not None and now >= deadline:
        overdue = now - deadline
        reason = f"deadline plus overrun passed at {lease.deadline} without a final state"
    else:
        left = expired_at + wait - now
        shown = f"vouched until {lease.vouched_until} (+{human_duration(left)})"
        return WatchDecision(Verdict.ALIVE, shown)
    if lease.provider is None or lease.instance is None:
        return WatchDecision(Verdict.NOTIFY, f"{reason}; the lease names no instance to end")
    cls = PROVIDERS.get(lease.provider)
    if cls is None:
        return WatchDecision(Verdict.NOTIFY, f"{reason}; unknown provider {lease.provider!r}")
    if lease.final_verified:
        return WatchDecision(Verdict.END, f"{reason}; the final push verified", Action.DESTROY)
    if cls.can_stop:
        return WatchDecision(Verdict.END, f"{reason}; weights not all verified", Action.STOP)
    if destroy_unverified_after is not None and overdue >= destroy_unverified_after:
        return WatchDecision(
            Verdict.END,
            f"{reason}; {lease.provider} cannot stop, and --destroy-unverified-after "
            f"{human_duration(destroy_unverified_after)} passed",
            Action.DESTROY,
        )
    return WatchDecision(
        Verdict.NOTIFY,
        f"{reason}; {lease.provider} cannot stop an instance and its weights are not all "
        f"verified: left running (since {utc_iso(now - overdue)})",
    )
