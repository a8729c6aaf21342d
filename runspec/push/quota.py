"""The Hub's commit quota, shared by everything in a process that commits to a repo.

The Hub limits commits per repository and answers past the limit with HTTP 429 and a message
such as "You have exceeded the rate limit for repository commits (128 per hour). You can retry
this action in 43 minutes" (seen in a public upload log; the Hub does not document its per-action
limits, which "tend to change over time": huggingface/hub-docs docs/hub/rate-limits.md; see
/work/shared/notes/hub-api.md). Once past it, every commit fails until then: the pushes and the
lease's renewals alike.

So runspec counts its own commits to each repo over the last hour and keeps the routine ones
(a push every `push.every`, an engine's push after each checkpoint) to ROUTINE_SHARE of the limit,
which leaves room for what must not wait (the final push, a push asked for now, the model card,
the lease's renewals). A 429 that says when to retry blocks every commit to that repo until
then, and the pusher retries at that time, not before. The pusher goes through
`within_quota()`; any other commit (the lease's renewal) through `hub_commit()`.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TypeVar

from runspec.clock import human_duration
from runspec.hubreach import endpoint_set
from runspec.push.base import PushFailed, PushTarget, one_line

T = TypeVar("T")

HUB_COMMITS_PER_HOUR = 128  # the limit the Hub's own 429 message names
WINDOW_S = 3600.0
ROUTINE_SHARE = 0.75  # routine commits stop at 96 an hour, 32 left for the final and renewals
MAX_RETRY_S = 2 * 3600.0  # a longer "retry in" is not believed past two hours
QUOTA_FIX = "push less often (push.every: 1m or more) or renew the lease less often (watch.lease)"

_RETRY_IN = re.compile(
    r"retry (?:this action )?in (?:about )?(?:(an?|one|[0-9]{1,4}) (second|minute|hour)s?)",
    re.IGNORECASE,
)
_UNITS = {"second": 1.0, "minute": 60.0, "hour": 3600.0}


def retry_in(message: str) -> float | None:
    """Seconds the Hub's quota message says to wait ("retry this action in 43 minutes", "in
    about 1 hour"); None when it says no time. Capped at MAX_RETRY_S."""
    found = _RETRY_IN.search(message[:2000])
    if found is None:
        return None
    count = found[1].lower()
    number = 1.0 if count in ("a", "an", "one") else float(int(count))
    return min(number * _UNITS[found[2].lower()], MAX_RETRY_S)


def quota_refusal(exc: BaseException) -> float | None:
    """For the commit quota's 429 (a huggingface_hub HfHubHTTPError, read by its response and
    server message): the seconds it says to wait (0.0 when it says none); None for any other
    error."""
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if not isinstance(status, int):
        return None
    message = f"{exc} {getattr(exc, 'server_message', None) or ''}"
    if not is_quota_refusal(status, message):
        return None
    return retry_in(message) or 0.0


def is_quota_refusal(status: int, message: str) -> bool:
    """A 429 that is the commit quota ("... repository commits (128 per hour) ...", "hourly
    quotas for action: commit"), not a general rate limit, whose Retry-After is seconds: a
    URL or a message of runspec's own naming a commit is no quota."""
    text = message[:2000].lower()
    return status == 429 and "commit" in text and ("per hour" in text or "quota" in text)


class CommitQuota:
    """One repo's commits as this process made them, and a block a 429 set. Times are
    monotonic seconds on the caller's clock (the system's in production)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._times: deque[float] = deque()
        self._blocked_until: float | None = None
        self._lock = threading.Lock()

    def routine_cap(self) -> int:
        return max(1, int(self.limit * ROUTINE_SHARE))

    def wait(self, now: float, routine: bool) -> float:
        """Seconds before a commit may be sent (0: now). Routine commits keep to the routine
        cap; every commit waits out a block the Hub set."""
        with self._lock:
            self._forget(now)
            left = 0.0
            if self._blocked_until is not None and now < self._blocked_until:
                left = self._blocked_until - now
            cap = self.routine_cap() if routine else self.limit
            if len(self._times) >= cap:
                left = max(left, self._times[len(self._times) - cap] + WINDOW_S - now)
            return left

    def committed(self, now: float) -> None:
        with self._lock:
            self._times.append(now)
            self._forget(now)

    def refused(self, now: float, retry_s: float | None) -> None:
        """The Hub answered the quota's 429: no commit before `retry_s` (or, when it said no
        time, before the oldest commit of the hour leaves the window)."""
        with self._lock:
            if retry_s is None:
                retry_s = self._times[0] + WINDOW_S - now if self._times else 60.0
            self._blocked_until = now + max(retry_s, 0.0)

    def _forget(self, now: float) -> None:
        while self._times and self._times[0] <= now - WINDOW_S:
            self._times.popleft()


_QUOTAS: dict[str, CommitQuota] = {}
_QUOTAS_LOCK = threading.Lock()


def quota_for(repo: str, repo_type: str = "model") -> CommitQuota:
    """The process's quota for one repo at the Hub it talks to now (HF_ENDPOINT)."""
    key = f"{endpoint_set() or 'https://huggingface.co'}|{repo_type}|{repo}"
    with _QUOTAS_LOCK:
        quota = _QUOTAS.get(key)
        if quota is None:
            quota = _QUOTAS[key] = CommitQuota(HUB_COMMITS_PER_HOUR)
        return quota


def per_hour(every_s: float | None) -> float:
    """Commits an hour that something done every `every_s` seconds makes."""
    return 0.0 if not every_s else WINDOW_S / max(every_s, 1.0)


def cadence_warning(every_s: float, lease_s: float | None) -> str | None:
    """What the preflight says when a spec's routine commits (a push every `every_s`, a lease
    renewal every `lease_s`) would cross the quota; None when they stay under it."""
    pushes, renewals = per_hour(every_s), per_hour(lease_s)
    cap = CommitQuota(HUB_COMMITS_PER_HOUR).routine_cap()
    if pushes + renewals <= cap:
        return None
    lease = f" and a lease renewal every {human_duration(lease_s)}" if lease_s else ""
    return (
        f"a push every {human_duration(every_s)}{lease} make about "
        f"{pushes + renewals:.0f} commits an hour to the repo; the Hub refuses commits past "
        f"about {HUB_COMMITS_PER_HOUR} an hour for up to an hour, so runspec spaces its routine "
        f"pushes to {cap} an hour"
    )


def hub_quota(target: PushTarget) -> CommitQuota | None:
    """The quota a target's commits count against (None: a folder has none)."""
    repo = getattr(target, "repo", None)
    return quota_for(repo) if target.key == "hub" and isinstance(repo, str) else None


def within_quota(quota: CommitQuota | None, now: float, sending: Callable[[], T]) -> T:
    """`sending()` (one commit), unless the quota says to wait: then PushFailed at once with
    the wait as its `retry_after`. A quota refusal from the Hub blocks the repo's commits."""
    if quota is not None and (wait := quota.wait(now, routine=False)) > 0:
        raise PushFailed(
            f"not sent: the Hub's commit quota allows the next commit in {human_duration(wait)}",
            retry_after=wait,
        )
    try:
        result = sending()
    except PushFailed as exc:
        if quota is not None and exc.retry_after is not None:
            quota.refused(now, exc.retry_after or None)
        raise
    if quota is not None:
        quota.committed(now)
    return result


def hub_commit(repo: str, commit: Callable[[], T], now: float | None = None) -> T:
    """One commit to `repo` that is not a push (the lease's renewal), under the same quota as
    the pushes: not sent while a quota 429 blocks the repo (PushFailed, with the wait), counted
    when made, and its own quota 429 blocks the repo's pushes too."""

    def sending() -> T:
        try:
            return commit()
        except Exception as exc:
            seconds = quota_refusal(exc)
            if seconds is None:
                raise
            raise PushFailed(
                f"{repo}: refused by the Hub's commit quota: {one_line(exc)}", retry_after=seconds
            ) from exc

    return within_quota(quota_for(repo), time.monotonic() if now is None else now, sending)
