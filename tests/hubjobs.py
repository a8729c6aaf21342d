"""Hugging Face Jobs in the local Hub: the routes huggingface_hub's HfApi uses (2.4.0's
hf_api.py: run_job, inspect_job, list_jobs, cancel_job, fetch_job_logs, list_jobs_hardware).

Jobs never run: a job is the request it came with (`Jobs.requests` keeps each body as sent,
for tests to read) and a stage a test may move (`Jobs.set_stage`); its logs are the lines a
test gives it (`Jobs.logs`).
"""

from __future__ import annotations

import datetime
import json
import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.hubhandler import Handler

_JOB = re.compile(r"^/api/jobs/(?P<ns>[^/]+)(?:/(?P<id>[0-9a-f]{24})(?:/(?P<action>[a-z]+))?)?$")


def _gpu(name: str, pretty: str, model: str, count: int, disk: str, micro: int) -> dict[str, Any]:
    return {
        "name": name,
        "prettyName": pretty,
        "cpu": "8 vCPU",
        "ram": "32 GB",
        "ephemeralStorage": disk,
        "accelerator": {
            "type": "gpu",
            "model": model,
            "quantity": str(count),
            "vram": "80 GB",
            "manufacturer": "Nvidia",
        },
        "unitCostMicroUSD": micro,
        "unitCostUSD": micro / 1e6,
        "unitLabel": "minute",
    }


# As HF's listing has them: cheapest first.
HARDWARE: list[dict[str, Any]] = [
    {
        "name": "cpu-basic",
        "prettyName": "CPU Basic",
        "cpu": "2 vCPU",
        "ram": "16 GB",
        "ephemeralStorage": "50 GB",
        "unitCostMicroUSD": 167,
        "unitCostUSD": 0.000167,
        "unitLabel": "minute",
    },
    _gpu("a10g-small", "Nvidia A10G - small", "A10G", 1, "100 GB", 16667),
    _gpu("h100", "Nvidia H100", "H100", 1, "500 GB", 75000),
    _gpu("h100x8", "8x Nvidia H100", "H100", 8, "1000 GB", 600000),
]


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass
class Jobs:
    hardware: list[dict[str, Any]] = field(default_factory=lambda: list(HARDWARE))
    hardware_down: bool = False  # the listing answers 503
    requests: list[dict[str, Any]] = field(default_factory=list)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    logs: dict[str, list[str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def set_stage(self, job_id: str, stage: str) -> None:
        with self._lock:
            self.jobs[job_id]["status"] = {"stage": stage, "message": None}

    def route(self, handler: Handler, method: str, path: str) -> tuple[str, Callable[[], None]]:
        """The route for a path under /api/jobs; ("unknown", ...) answers 404."""
        if path == "/api/jobs/hardware" and method == "GET":
            return "jobs_hardware", lambda: self._hardware(handler)
        m = _JOB.match(path)
        if m is None:
            return "unknown", lambda: handler._json(404, {"error": f"no job route {path}"})
        ns, job_id, action = m["ns"], m["id"], m["action"]
        if job_id is None and method == "POST":
            return "jobs_run", lambda: self._create(handler, ns)
        if job_id is None and method == "GET":
            return "jobs_list", lambda: self._list(handler, ns)
        if action is None and method == "GET":
            return "jobs_inspect", lambda: self._answer(handler, ns, job_id)
        if action == "cancel" and method == "POST":
            return "jobs_cancel", lambda: self._cancel(handler, ns, job_id)
        if action == "logs" and method == "GET":
            return "jobs_logs", lambda: self._logs(handler, ns, job_id)
        return "unknown", lambda: handler._json(404, {"error": f"no job route {path}"})

    def _hardware(self, handler: Handler) -> None:
        if self.hardware_down:
            handler._json(503, {"error": "hardware listing unavailable"})
        else:
            handler._json(200, self.hardware)

    def _create(self, handler: Handler, ns: str) -> None:
        body = json.loads(handler._body() or b"{}")
        job_id = secrets.token_hex(12)
        job = {
            "id": job_id,
            "createdAt": _now(),
            "dockerImage": body.get("dockerImage"),
            "command": body.get("command"),
            "arguments": body.get("arguments", []),
            "environment": body.get("environment", {}),
            # As HF answers: the names of the secrets, never their values.
            "secrets": dict.fromkeys(body.get("secrets") or {}),
            "flavor": body.get("flavor"),
            "labels": body.get("labels"),
            "status": {"stage": "RUNNING", "message": None},
            "owner": {"id": "0" * 24, "name": ns, "type": "user"},
        }
        with self._lock:
            self.requests.append(body)
            self.jobs[job_id] = job
        handler._json(200, job)

    def _job(self, handler: Handler, ns: str, job_id: str) -> dict[str, Any] | None:
        job = self.jobs.get(job_id)
        if job is None or job["owner"]["name"] != ns:
            handler._json(404, {"error": "Job not found"})
            return None
        return job

    def _answer(self, handler: Handler, ns: str, job_id: str) -> None:
        if (job := self._job(handler, ns, job_id)) is not None:
            handler._json(200, job)

    def _list(self, handler: Handler, ns: str) -> None:
        handler._json(200, [j for j in self.jobs.values() if j["owner"]["name"] == ns])

    def _cancel(self, handler: Handler, ns: str, job_id: str) -> None:
        handler._drain()
        if self._job(handler, ns, job_id) is not None:
            self.set_stage(job_id, "CANCELED")
            handler._json(200, {})

    def _logs(self, handler: Handler, ns: str, job_id: str) -> None:
        if self._job(handler, ns, job_id) is None:
            return
        events = [{"data": line, "timestamp": _now()} for line in self.logs.get(job_id, [])]
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
        handler._send(200, body, {"Content-Type": "text/event-stream"})
