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


def _flavor(
    name: str,
    pretty: str,
    cpu: str,
    ram: str,
    disk: str,
    cents_per_hour: int,
    gpu: tuple[str, int, str] | None = None,
) -> dict[str, Any]:
    """One entry as GET /api/jobs/hardware answers it (the keys huggingface_hub 2.4.0's
    JobHardwareInfo reads: _jobs_api.py), priced per minute in micro-dollars."""
    micro = round(cents_per_hour * 10_000 / 60)
    entry: dict[str, Any] = {
        "name": name,
        "prettyName": pretty,
        "cpu": cpu,
        "ram": ram,
        "ephemeralStorage": disk,
        "unitCostMicroUSD": micro,
        "unitCostUSD": micro / 1e6,
        "unitLabel": "minute",
    }
    if gpu is not None:
        model, count, vram = gpu
        entry["accelerator"] = {
            "type": "gpu",
            "model": model,
            "quantity": str(count),
            "vram": vram,
            "manufacturer": "Nvidia",
        }
    return entry


# HF's flavors, specs and hourly prices as hub-docs publishes them (docs/hub/jobs-pricing.md;
# the names are huggingface_hub's JobHardware enum, _jobs_api.py:28-68). There is no H100.
# The listing is not sorted by price: here it comes in the enum's order, except that the
# larger A10G and T4 come before the smaller, so a client taking the first match pays more.
HARDWARE: list[dict[str, Any]] = [
    _flavor("cpu-basic", "CPU Basic", "2 vCPU", "16 GB", "50 GB", 1),
    _flavor("cpu-upgrade", "CPU Upgrade", "8 vCPU", "32 GB", "50 GB", 3),
    _flavor("cpu-performance", "CPU Performance", "32 vCPU", "256 GB", "1024 GB", 190),
    _flavor("cpu-xl", "CPU XL", "16 vCPU", "124 GB", "1000 GB", 100),
    _flavor("t4-medium", "Nvidia T4 - medium", "8 vCPU", "30 GB", "100 GB", 60, ("T4", 1, "16 GB")),
    _flavor("t4-small", "Nvidia T4 - small", "4 vCPU", "15 GB", "50 GB", 40, ("T4", 1, "16 GB")),
    _flavor("l4x1", "1x Nvidia L4", "8 vCPU", "30 GB", "400 GB", 80, ("L4", 1, "24 GB")),
    _flavor("l4x4", "4x Nvidia L4", "48 vCPU", "186 GB", "3200 GB", 380, ("L4", 4, "96 GB")),
    _flavor("l40sx1", "1x Nvidia L40S", "8 vCPU", "62 GB", "380 GB", 180, ("L40S", 1, "48 GB")),
    _flavor("l40sx4", "4x Nvidia L40S", "48 vCPU", "382 GB", "3200 GB", 830, ("L40S", 4, "192 GB")),
    _flavor(
        "l40sx8", "8x Nvidia L40S", "192 vCPU", "1534 GB", "6500 GB", 2350, ("L40S", 8, "384 GB")
    ),
    _flavor(
        "a10g-large", "Nvidia A10G - large", "12 vCPU", "46 GB", "200 GB", 150, ("A10G", 1, "24 GB")
    ),
    _flavor(
        "a10g-small", "Nvidia A10G - small", "4 vCPU", "15 GB", "110 GB", 100, ("A10G", 1, "24 GB")
    ),
    _flavor(
        "a10g-largex2",
        "2x Nvidia A10G - large",
        "24 vCPU",
        "92 GB",
        "1000 GB",
        300,
        ("A10G", 2, "48 GB"),
    ),
    _flavor(
        "a10g-largex4",
        "4x Nvidia A10G - large",
        "48 vCPU",
        "184 GB",
        "2000 GB",
        500,
        ("A10G", 4, "96 GB"),
    ),
    _flavor(
        "a100-large",
        "Nvidia A100 - large",
        "12 vCPU",
        "142 GB",
        "1000 GB",
        250,
        ("A100", 1, "80 GB"),
    ),
    _flavor(
        "a100x4",
        "4x Nvidia A100 - large",
        "48 vCPU",
        "568 GB",
        "4000 GB",
        1000,
        ("A100", 4, "320 GB"),
    ),
    _flavor(
        "a100x8",
        "8x Nvidia A100 - large",
        "96 vCPU",
        "1136 GB",
        "8000 GB",
        2000,
        ("A100", 8, "640 GB"),
    ),
    _flavor("h200", "Nvidia H200", "23 vCPU", "256 GB", "3000 GB", 500, ("H200", 1, "141 GB")),
    _flavor(
        "h200x2", "2x Nvidia H200", "46 vCPU", "512 GB", "6000 GB", 1000, ("H200", 2, "282 GB")
    ),
    _flavor(
        "h200x4", "4x Nvidia H200", "92 vCPU", "1024 GB", "12000 GB", 2000, ("H200", 4, "564 GB")
    ),
    _flavor(
        "h200x8", "8x Nvidia H200", "184 vCPU", "2048 GB", "24000 GB", 4000, ("H200", 8, "1128 GB")
    ),
    _flavor(
        "rtx-pro-6000",
        "Nvidia RTX PRO 6000",
        "23 vCPU",
        "256 GB",
        "475 GB",
        275,
        ("RTX PRO 6000", 1, "96 GB"),
    ),
    _flavor(
        "rtx-pro-6000x2",
        "2x Nvidia RTX PRO 6000",
        "46 vCPU",
        "512 GB",
        "950 GB",
        550,
        ("RTX PRO 6000", 2, "192 GB"),
    ),
    _flavor(
        "rtx-pro-6000x4",
        "4x Nvidia RTX PRO 6000",
        "92 vCPU",
        "1024 GB",
        "1900 GB",
        1100,
        ("RTX PRO 6000", 4, "384 GB"),
    ),
    _flavor(
        "rtx-pro-6000x8",
        "8x Nvidia RTX PRO 6000",
        "184 vCPU",
        "2048 GB",
        "3800 GB",
        2200,
        ("RTX PRO 6000", 8, "768 GB"),
    ),
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
