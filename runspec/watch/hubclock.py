"""The Hub's own clock, as a watcher reads it: the newest commits of a run's repo, each with the
time the Hub gave it, and the `Date` header of the Hub's answer.

A box's liveness is judged on the Hub's clock alone (runspec.watch.liveness): when the box's
newest commit landed, and what time the Hub says it is now. Neither the box's clock nor the
watcher's enters the verdict; the watcher's is only compared with the Hub's, so a watcher whose
clock is off says so instead of acting on it.

The page is the Hub's first page of the branch's commits (newest first), read once, capped in
size and parsed strictly: a hostile repo cannot hand the watcher a huge or odd answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

from runspec.clock import Clock, parse_utc_iso
from runspec.hubreach import endpoint
from runspec.push.base import one_line
from runspec.units import plain_int
from runspec.watch.lease import LeaseError

MAX_BYTES = 256 * 1024  # the first page of a repo's commits is a few kilobytes
READ_TIMEOUT_S = 30.0
BOX_PREFIX = "runspec: "  # the box's commits: its pushes, its card, its lease
_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class HubCommit:
    sha: str
    title: str
    at: float  # when the Hub made it, on the Hub's clock

    @property
    def by_box(self) -> bool:
        """Made by the box (a push, the card, a renewal), not by a watcher or by hand."""
        return self.title.startswith(BOX_PREFIX)


@dataclass(frozen=True)
class HubPage:
    commits: list[HubCommit]  # newest first
    hub_now: float  # the answer's Date header: the Hub's clock, to the second
    local_now: float  # the watcher's clock when the answer came

    @property
    def skew(self) -> float:
        """How far the watcher's clock is ahead of the Hub's (negative: behind). The Date
        header is whole seconds, cut down: up to a second of this is the header's own."""
        return self.local_now - self.hub_now

    def newest_of_box(self) -> HubCommit | None:
        return next((c for c in self.commits if c.by_box), None)


def retry_after(exc: BaseException | None) -> float | None:
    """The seconds a 429 or 503 asked for (`Retry-After: N`), from the error or its cause;
    None when none was asked or the header is not a plain number (an HTTP date is not read)."""
    while exc is not None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        if headers is not None and getattr(response, "status_code", None) in (429, 503):
            value = plain_int(str(headers.get("Retry-After") or "").strip())
            return float(min(value, 3600)) if value is not None else None
        exc = exc.__cause__
    return None


def refused(exc: BaseException | None) -> bool:
    """The Hub refused the token (401, 403): trying again changes nothing."""
    while exc is not None:
        response = getattr(exc, "response", None)
        if getattr(response, "status_code", None) in (401, 403):
            return True
        exc = exc.__cause__
    return False


def hub_date(value: str | None) -> float:
    """An HTTP `Date` header as UTC seconds; raises LeaseError when there is none."""
    try:
        when = parsedate_to_datetime(value or "")
    except (TypeError, ValueError) as exc:
        raise LeaseError(f"the Hub's answer has no readable Date header ({value!r})") from exc
    if when.tzinfo is None:
        raise LeaseError(f"the Hub's Date header names no time zone ({value!r})")
    return when.timestamp()


def _commit(item: Any) -> HubCommit:
    if not isinstance(item, dict):
        raise LeaseError("the Hub's commit list holds something that is not a commit")
    sha, title, date = item.get("id"), item.get("title"), item.get("date")
    if not (isinstance(sha, str) and _SHA.fullmatch(sha)):
        raise LeaseError("the Hub's commit list holds a commit without a commit id")
    if not isinstance(title, str) or not isinstance(date, str):
        raise LeaseError(f"the Hub's commit {sha[:12]} has no title or no date")
    try:
        at = parse_utc_iso(date.replace("Z", "+00:00"))
    except ValueError as exc:
        raise LeaseError(f"the Hub's commit {sha[:12]} has a date that is no time") from exc
    return HubCommit(sha, title[:200], at)


def newest_commits(repo: str, clock: Clock, revision: str = "main") -> HubPage:
    """The first page of `repo`'s commits with the Hub's time; raises LeaseError."""
    from huggingface_hub.utils import build_hf_headers, get_session

    url = f"{endpoint()}/api/models/{repo}/commits/{quote(revision, safe='')}"
    data = bytearray()
    try:
        with get_session().stream(
            "GET", url, headers=build_hf_headers(), timeout=READ_TIMEOUT_S
        ) as resp:
            local_now = clock.time()
            if resp.status_code != 200:
                error = LeaseError(f"{repo}: listing its commits got {resp.status_code}")
                error.__cause__ = _Answer(resp)
                raise error
            date = resp.headers.get("Date")
            for chunk in resp.iter_bytes():
                data += chunk
                if len(data) > MAX_BYTES:
                    raise LeaseError(f"{repo}: its commit list is over {MAX_BYTES} bytes")
    except LeaseError:
        raise
    except Exception as exc:  # the network's fault: unreadable
        raise LeaseError(f"cannot list {repo}'s commits: {one_line(exc)}") from exc
    try:
        items = json.loads(data)
    except ValueError as exc:
        raise LeaseError(f"{repo}: its commit list is not JSON") from exc
    if not isinstance(items, list):
        raise LeaseError(f"{repo}: its commit list is not a list")
    return HubPage([_commit(item) for item in items], hub_date(date), local_now)


class _Answer(Exception):
    """An HTTP answer kept as an error's cause, so retry_after can read its headers."""

    def __init__(self, response: Any) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response
