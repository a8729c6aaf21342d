"""Time from a verified final push to the finish action starting (goal: under 2 s).

Measured through runspec's own finish path: a run record gets its verified final push (the
moment the pusher records it), the record moves to `finishing`, and `apply_finish` runs the
spec's action. Two actions:

- command: `touch MARKER`; the action started when touch wrote the file (its mtime).
- destroy through vast.ai's adapter, against a stand-in API on 127.0.0.1; the action started
  when the DELETE request arrived.

Run: .venv/bin/python bench/bench_finish.py [--runs 20]
Prints one line per action: median, p90 and max latency in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from runspec.clock import utc_iso
from runspec.finish import FinishHost, apply_finish
from runspec.loader import load_spec_text
from runspec.model import Spec
from runspec.state import PushRecord, RecordStore, RunRecord, RunStatus

SPEC = """\
runspec: 1
name: bench-finish-{i}
dataset: {{synthetic: {{}}}}
train: {{model: yolo9-t, epochs: 3, device: cpu}}
push: {{dir: {push}}}
budget: {{wall_clock: 10m}}
finish: {finish}
"""


def verified_then_finish(spec: Spec, state: Path, host: FinishHost) -> float:
    """Record the verified final push; return its time.time(); then run the finish path."""
    store = RecordStore(state)
    record = RunRecord(name=spec.name, spec_sha256=spec.sha256, status=RunStatus.PUSHING)
    record.last_push = PushRecord(epoch=3, time="", commit="c0ffee", files=[], final=True)
    t0 = time.time()
    record.last_push.time = utc_iso(t0)
    store.save(record)
    store.transition(record, RunStatus.FINISHING, "completed; applying the finish action")
    apply_finish(spec, record, verified=True, dry_run=False, log=lambda _line: None, host=host)
    return t0


def bench_command(runs: int, tmp: Path) -> list[float]:
    latencies = []
    for i in range(runs):
        marker = tmp / f"marker-{i}"
        spec = load_spec_text(
            SPEC.format(
                i=i, push=tmp / "pushed", finish=f"{{action: command, command: [touch, {marker}]}}"
            ),
            "bench.yaml",
        )
        t0 = verified_then_finish(spec, tmp / f"state-c{i}", FinishHost())
        latencies.append(marker.stat().st_mtime_ns / 1e9 - t0)
    return latencies


def bench_destroy(runs: int, tmp: Path) -> list[float]:
    arrivals: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            if self.command == "DELETE":
                arrivals.append(time.time())
            body = b'{"instances": null}' if self.command == "GET" else b'{"success": true}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    environ = tmp / "environ"
    environ.write_bytes(b"")
    env = {
        "RUNSPEC_VAST_API": f"http://127.0.0.1:{server.server_address[1]}",
        "RUNSPEC_PROC_ENVIRON": str(environ),
        "CONTAINER_ID": "4242",
        "CONTAINER_API_KEY": "bench-key",
    }
    latencies = []
    try:
        for i in range(runs):
            spec = load_spec_text(
                SPEC.format(i=i, push=tmp / "pushed", finish="{action: destroy, provider: vast}"),
                "bench.yaml",
            )
            t0 = verified_then_finish(spec, tmp / f"state-d{i}", FinishHost(env=env))
            latencies.append(arrivals[-1] - t0)
    finally:
        server.shutdown()
        server.server_close()
    return latencies


def report(name: str, latencies: list[float]) -> None:
    ms = sorted(x * 1000 for x in latencies)
    p90 = ms[max(0, round(0.9 * len(ms)) - 1)]
    print(
        f"verified push -> {name} started: median {statistics.median(ms):.1f} ms, "
        f"p90 {p90:.1f} ms, max {ms[-1]:.1f} ms over {len(ms)} runs (goal < 2000 ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-finish-") as tmp:
        os.chmod(tmp, 0o700)
        report("command (touch)", bench_command(args.runs, Path(tmp)))
        report("destroy (vast stand-in DELETE)", bench_destroy(args.runs, Path(tmp)))


if __name__ == "__main__":
    main()
