"""The local Hub's scheduled Jobs, as much as `HfApi.create_scheduled_job` needs: a POST to
/api/scheduled-jobs/{namespace} is recorded whole (schedule, jobSpec with flavor, command and
secrets) and answered with the ScheduledJobInfo the client builds. Nothing runs."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.hubhandler import Handler

_SCHEDULED = re.compile(r"^/api/scheduled-jobs/(?P<namespace>[^/]+)$")


def scheduled_jobs(hub: object) -> list[dict[str, Any]]:
    """Every scheduled job created on this Hub, as the request's JSON plus its namespace."""
    jobs: list[dict[str, Any]] = hub.__dict__.setdefault("scheduled_jobs", [])
    return jobs


def route(handler: Handler, method: str, path: str) -> tuple[str, Callable[[], None]] | None:
    if method == "POST" and (m := _SCHEDULED.match(path)):
        return "scheduled_job", lambda: _create(handler, m["namespace"])
    return None


def _create(handler: Handler, namespace: str) -> None:
    request = json.loads(handler._body() or b"{}")
    job = {**request, "namespace": namespace, "id": secrets.token_hex(12)}
    with handler.hub._lock:
        scheduled_jobs(handler.hub).append(job)
    spec = request.get("jobSpec") or {}
    handler._json(
        200,
        {
            "id": job["id"],
            "createdAt": "2026-12-01T00:00:00.000Z",
            "schedule": request.get("schedule"),
            "suspend": bool(request.get("suspend")),
            "concurrency": bool(request.get("concurrency")),
            "owner": {"id": "0" * 24, "name": namespace, "type": "org"},
            # What the Hub answers: the secrets' names, never their values.
            "jobSpec": {**spec, "secrets": sorted(spec.get("secrets") or {})},
        },
    )
