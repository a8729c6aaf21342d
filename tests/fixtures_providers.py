"""A local stand-in for the providers' APIs and metadata servers, on 127.0.0.1 only.

It records every request (method, path, headers, body) and answers from scripted routes: each
route holds a list of answers consumed in order, the last one repeating, so a test can say
"running, running, then gone" or "403 always". Nothing in the tests can reach a real provider:
every adapter's base URL points here and /proc/1/environ and DMI reads point at test files.

Where the answers come from: vast.ai's from vast-ai/docs' OpenAPI (api-reference/openapi/yaml,
DELETE and GET /api/v0/instances/{id}/: a destroy answers `{"success", "msg"}`, success false
being a refusal; GET answers `{"instances": <object or null>}`, null once destroyed; both need
the key's `instance_write` / `instance_read` scope) and vast-cli; the other providers'
documented answers and refusals, checked against what they are sent, are in
tests/provider_apis.py (GCE, Hetzner, EC2).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def header(self, name: str) -> str | None:
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return None


@dataclass
class Answer:
    status: int = 200
    body: Any = None  # dict/list: JSON; str/bytes: as is
    delay: float = 0.0  # a hang: the answer comes this late (the request still acts)
    headers: dict[str, str] = field(default_factory=dict)  # e.g. Retry-After

    def encoded(self) -> tuple[bytes, str]:
        if isinstance(self.body, bytes):
            return self.body, "application/octet-stream"
        if isinstance(self.body, str):
            return self.body.encode(), "text/plain"
        if self.body is None:
            return b"", "application/json"
        return json.dumps(self.body).encode(), "application/json"


@dataclass
class Route:
    method: str
    pattern: re.Pattern[str]
    answers: list[Answer]
    hits: int = 0
    decide: Callable[[], Answer] | None = None  # computes each answer (called unlocked)
    reply: Callable[[Recorded], Answer] | None = None  # the same, from the request itself

    def next(self) -> Answer:
        answer = self.answers[min(self.hits, len(self.answers) - 1)]
        self.hits += 1
        return answer


@dataclass
class StandIn:
    url: str = ""
    requests: list[Recorded] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on(self, method: str, path_regex: str, *answers: Answer) -> Route:
        route = Route(method, re.compile(path_regex + r"\Z"), list(answers) or [Answer()])
        with self.lock:
            self.routes.insert(0, route)  # a later route overrides an earlier one
        return route

    def answer_with(self, method: str, path_regex: str, decide: Callable[[], Answer]) -> Route:
        """A route whose every answer `decide` computes when the request arrives."""
        route = self.on(method, path_regex)
        route.decide = decide
        return route

    def reply_with(
        self, method: str, path_regex: str, reply: Callable[[Recorded], Answer]
    ) -> Route:
        """A route whose every answer `reply` computes from the request (its query, headers
        and body): a stand-in that checks what it is sent, as the real service does."""
        route = self.on(method, path_regex)
        route.reply = reply
        return route

    def find(self, method: str, path: str, request: Recorded | None = None) -> Answer:
        with self.lock:
            route = next(
                (r for r in self.routes if r.method == method and r.pattern.match(path)), None
            )
            if route is None:
                return Answer(404, {"error": f"no route for {method} {path}"})
            if route.reply is None and route.decide is None:
                return route.next()
            reply, decide = route.reply, route.decide
        # Called unlocked: an answer may read what was asked (`made`), which takes the lock.
        if reply is not None and request is not None:
            return reply(request)
        assert decide is not None
        return decide()

    def made(self, method: str | None = None, path_regex: str | None = None) -> list[Recorded]:
        with self.lock:
            found = list(self.requests)
        return [
            r
            for r in found
            if (method is None or r.method == method)
            and (path_regex is None or re.fullmatch(path_regex, r.path))
        ]


def vast_answers_stopped(standin: StandIn, instance: str = "4242") -> None:
    """vast.ai's API for one instance that accepts a stop or a destroy and then reads stopped."""
    path = rf"/api/v0/instances/{instance}/"
    standin.on("DELETE", path, Answer(200, {"success": True}))
    standin.on("PUT", path, Answer(200, {"success": True}))
    standin.on(
        "GET",
        path,
        Answer(200, {"instances": {"actual_status": "stopped", "intended_status": "stopped"}}),
    )


class VastInstance:
    """vast.ai's API for one instance that reads running until a stop or a destroy took
    effect, then (after `confirm_polls` more reads) stopped or gone. `on_delete` runs when the
    DELETE arrives (a test checks the machine's state at that very moment).

    The provider's faults: `deletes` and `puts` are the answers each request gets in turn (the
    last repeating; default 200); a request takes effect only when its answer is a 2xx, even
    one that comes too late for the client (a hang: `Answer(200, delay=...)`). `never_gone`:
    a DELETE is accepted but the instance keeps reading running."""

    PATH = r"/api/v0/instances/4242/"

    def __init__(
        self,
        standin: StandIn,
        confirm_polls: int = 0,
        on_delete: Callable[[], None] | None = None,
        *,
        deletes: tuple[Answer, ...] = (),
        puts: tuple[Answer, ...] = (),
        never_gone: bool = False,
    ) -> None:
        self.standin = standin
        self.confirm_polls = confirm_polls
        self.on_delete = on_delete
        self.never_gone = never_gone
        self.scripts = {"DELETE": list(deletes), "PUT": list(puts)}
        self.hits = {"DELETE": 0, "PUT": 0}
        self.effects: list[str] = []  # the requests that took effect, in order
        self._polls_after = 0
        standin.answer_with("PUT", self.PATH, lambda: self._act("PUT"))
        standin.answer_with("DELETE", self.PATH, self._delete)
        standin.answer_with("GET", self.PATH, self._state)

    def _act(self, method: str) -> Answer:
        script = self.scripts[method]
        answer = script[min(self.hits[method], len(script) - 1)] if script else Answer()
        self.hits[method] += 1
        # vast's 200 with {"success": false} is a refusal (destroy_instance.yaml): no effect.
        refused = isinstance(answer.body, dict) and answer.body.get("success") is False
        if answer.status < 300 and not refused and not (method == "DELETE" and self.never_gone):
            self.effects.append(method)
        return Answer(answer.status, answer.body or {"success": answer.status < 300},
                      answer.delay, answer.headers)  # fmt: skip

    def _delete(self) -> Answer:
        if self.on_delete is not None:
            self.on_delete()
        return self._act("DELETE")

    def _state(self) -> Answer:
        if self.effects:
            self._polls_after += 1
        if not self.effects or self._polls_after <= self.confirm_polls:
            return Answer(200, {"instances": {"actual_status": "running"}})
        if "DELETE" in self.effects:
            return Answer(200, {"instances": None})  # as vast answers a destroyed instance
        return Answer(200, {"instances": {"actual_status": "stopped"}})


def _handler(stand_in: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            recorded = Recorded(self.command, self.path, dict(self.headers.items()), body)
            with stand_in.lock:
                stand_in.requests.append(recorded)
            answer = stand_in.find(self.command, self.path, recorded)
            if answer.delay:
                time.sleep(min(answer.delay, 10.0))  # bounded: never hang a test
            data, ctype = answer.encoded()
            try:
                self.send_response(answer.status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture(autouse=True)
def _no_real_poweroff(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test, nor any runspec process a test starts, may run the real poweroff commands."""
    monkeypatch.setenv("RUNSPEC_TEST_NO_POWEROFF", "1")


@pytest.fixture
def standin() -> Iterator[StandIn]:
    stand_in = StandIn()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stand_in))
    server.daemon_threads = True
    stand_in.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def provider_env(standin: StandIn, tmp_path: Path) -> dict[str, str]:
    """An environment with every adapter's URLs on the stand-in and no real host files read."""
    environ = tmp_path / "proc1-environ"
    environ.write_bytes(b"PATH=/usr/bin\0HOME=/root\0")
    dmi = tmp_path / "dmi"
    dmi.mkdir()
    return {
        "RUNSPEC_PROC_ENVIRON": str(environ),
        "RUNSPEC_DMI_DIR": str(dmi),
        "RUNSPEC_VAST_API": standin.url,
        "RUNSPEC_RUNPOD_API": f"{standin.url}/v1",
        "RUNSPEC_LAMBDA_API": f"{standin.url}/api/v1",
        "RUNSPEC_HETZNER_METADATA": f"{standin.url}/hetzner/v1/metadata",
        "RUNSPEC_HETZNER_API": f"{standin.url}/v1",
        "RUNSPEC_GCP_METADATA": f"{standin.url}/computeMetadata/v1",
        "RUNSPEC_GCP_COMPUTE_API": f"{standin.url}/compute/v1",
        "RUNSPEC_AWS_METADATA": standin.url,
        "RUNSPEC_AWS_EC2_API": f"{standin.url}/ec2",
    }
