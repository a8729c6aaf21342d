"""What the off-box watch needs, checked before training: a lease in a Hub repo the token may
write (the push check proves that much) and an interval that keeps the run's commits well inside
the Hub's commit rate beside its pushes."""

from __future__ import annotations

from collections.abc import Mapping

from runspec.checkresult import CheckResult, passed, warned
from runspec.clock import human_duration
from runspec.spec.model import Spec
from runspec.watch.seal import KEY_VARIABLE, key_problem

VOUCH_LEASES = 2  # as runspec.watch.lease: vouched this many leases ahead, plus a grace of one
COMMITS_PER_HOUR_MAX = 120.0  # runspec's own bound on a run's commits (lease and pushes)


def watch_key_check(spec: Spec, environ: Mapping[str, str]) -> list[CheckResult]:
    """Whether this box can seal its lease (runspec.watch.seal). In the parent: the key is a
    secret, and the preflight's child never holds one."""
    if spec.watch.lease is None or spec.push is None or spec.push.hub is None:
        return []
    if (problem := key_problem(environ)) is None:
        return [passed("watch key", f"the lease is sealed with {KEY_VARIABLE}")]
    # Without the key the lease is unsealed: a watcher proves none of it and ends nothing.
    return [
        warned(
            "watch key",
            f"{problem}: the lease is unsealed and no watcher acts on it",
            f"set {KEY_VARIABLE} (e.g. `openssl rand -hex 32`) in /etc/runspec/env and in the "
            "watcher's environment, or watch.lease: none",
        )
    ]


def watch_check(spec: Spec) -> CheckResult:
    hub = spec.push.hub if spec.push is not None else None
    lease = spec.watch.lease
    if hub is None or spec.push is None:
        return passed("watch", "no Hub target: no lease, so `runspec watch` cannot guard this box")
    if lease is None:
        return passed("watch", "watch.lease is none: nothing off this box ends it if it hangs")
    renewals = 3600.0 / lease
    pushes = 3600.0 / spec.push.every
    ended = human_duration((VOUCH_LEASES + 1) * lease)
    said = (
        f"lease every {human_duration(lease)} in {hub.repo}: {renewals:.0f} commits an hour "
        f"beside the pushes' {pushes:.0f}; a watcher ends a hung box {ended} after its last "
        "renewal"
    )
    if renewals + pushes > COMMITS_PER_HOUR_MAX:
        return warned(
            "watch",
            f"{said}: {renewals + pushes:.0f} commits an hour is over runspec's bound of "
            f"{COMMITS_PER_HOUR_MAX:.0f}",
            "lengthen watch.lease (5m is 12 an hour) or push.every",
        )
    if lease * (VOUCH_LEASES + 1) >= spec.budget.wall_clock:
        return warned(
            "watch",
            f"{said}, which is longer than the run's wall_clock "
            f"{human_duration(spec.budget.wall_clock)}: only the deadline check guards it",
            "shorten watch.lease",
        )
    return passed("watch", said)
