"""Time from a verified final push to the finish action starting (goal: under 2 s).

Measured through runspec's own finish path: a run record gets its verified final push (the
moment the pusher records it), the record moves to `finishing`, and `apply_finish` runs the
spec's action. Two actions:

- command: `touch MARKER`; the action started when touch wrote the file (its mtime).
- destroy through vast.ai's adapter, against a stand-in API on 127.0.0.1; the action started
  when the DELETE request arrived.

And, with the deadline planner driven by a manual clock over many simulated budget runs
(noisy epochs, every 5th validating and longer, a measured upload rate that varies from the
planner's view by up to 30 %): how far before the deadline the finish ran, and how much budget
the last stop left unused (goal: under one epoch plus the reserve; never past the deadline).

Run: .venv/bin/python bench/bench_finish.py [--runs 20] [--simulations 500]
Prints one line per figure.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from runspec.budget import Planner, validates
from runspec.clock import ManualClock, utc_iso
from runspec.machine.finish import FinishHost, apply_finish
from runspec.spec.loader import load_spec_text
from runspec.spec.model import Spec
from runspec.store.state import PushRecord, RecordStore, RunRecord, RunStatus

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


def simulate(seed: int) -> tuple[float, float, float, bool]:
    """One budget run: (finish before deadline, unused budget at the stop, longest epoch +
    reserve, whether an epoch had to be interrupted at the point of no return), in seconds."""
    rng = random.Random(seed)
    clock = ManualClock()
    wall_clock = rng.choice([1800.0, 3600.0, 4 * 3600.0])
    deadline = clock.time() + wall_clock
    clock.advance(rng.uniform(60, 300))  # preflight and staging
    planner = Planner(deadline, None, clock, finish_seconds=15.0)
    epoch_s = rng.uniform(30, 400)
    total, interval = 10_000, 5
    pending = 3 * 35_000_000 * rng.choice([1, 10])  # best, last, epoch_N: 35 MB or 350 MB each
    true_rate = rng.uniform(2e6, 50e6)
    epoch, longest, interrupted = 0, 0.0, False
    while True:
        nxt = validates(epoch + 1, total, interval)
        seen_rate = true_rate * rng.uniform(0.7, 1.3)  # the pusher's measurement wobbles
        decision = planner.decide(nxt, pending, seen_rate)
        if not decision.fits:
            break
        length = epoch_s * (1.4 if nxt else 1.0) * rng.uniform(0.85, 1.15)
        if clock.time() + length > decision.point_of_no_return:
            # The supervisor ends the epoch in progress at the point of no return and pushes the
            # staged copy of the newest complete checkpoint.
            clock.advance(decision.point_of_no_return - clock.time())
            interrupted = True
            break
        clock.advance(length)
        epoch += 1
        longest = max(longest, length)
        planner.record_epoch(epoch, length, nxt)
    stopped = clock.time()
    clock.advance(5.0 + pending / true_rate)  # the final push as it really goes
    return deadline - clock.time(), deadline - stopped, longest + decision.reserve_s, interrupted


def report_simulation(n: int) -> None:
    results = [simulate(seed) for seed in range(n)]
    before = sorted(r[0] for r in results)
    unused = sorted(r[1] for r in results)
    within = sum(1 for r in results if r[1] <= r[2])
    late = sum(1 for r in results if r[0] < 0)
    cut = sum(1 for r in results if r[3])
    print(
        f"planner over {n} simulated budget runs: the finish started "
        f"{statistics.median(before):.0f} s before the deadline (median; min {before[0]:.0f} s), "
        f"{late} runs past it; the last stop left {statistics.median(unused):.0f} s of budget "
        f"unused (median; max {unused[-1]:.0f} s), under one epoch + reserve in {within}/{n} "
        f"runs; {cut} runs had an epoch interrupted at the point of no return"
    )


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
    parser.add_argument("--simulations", type=int, default=500)
    args = parser.parse_args()
    report_simulation(args.simulations)
    with tempfile.TemporaryDirectory(prefix="bench-finish-") as tmp:
        os.chmod(tmp, 0o700)
        report("command (touch)", bench_command(args.runs, Path(tmp)))
        report("destroy (vast stand-in DELETE)", bench_destroy(args.runs, Path(tmp)))


if __name__ == "__main__":
    main()
