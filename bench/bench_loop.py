"""The daemon loop's per-step work with N finished runs in the state folder against none.

    .venv/bin/python bench/bench_loop.py [--runs 1000] [--steps 200]

One step here is what the loop does every second whatever happens: the cancel look
(RunKeeper.handle_cancels) and the timed jobs (Timers.run_due). The queue's refresh (every
record read) runs only when something changed or every 10 s, and is timed apart. Prints the
figures; asserts nothing (goal: a step with 1,000 finished runs costs no more than with none).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runspec.clock import SYSTEM, utc_iso  # noqa: E402
from runspec.daemon.config import DaemonConfig  # noqa: E402
from runspec.daemon.runs import RunKeeper  # noqa: E402
from runspec.store.paths import RunPaths  # noqa: E402
from runspec.store.state import RecordStore, RunRecord, RunStatus, Termination  # noqa: E402
from runspec.timers import Timers  # noqa: E402


def keeper(state: Path, runs: int) -> RunKeeper:
    store = RecordStore(state)
    for i in range(runs):
        name = f"done{i:05d}"
        paths = RunPaths(state, name, state / "runs", state / "data")
        paths.job_dir.mkdir(parents=True)
        paths.save()
        paths.spec_file.write_text("name: x\n")
        now = utc_iso(SYSTEM.time())
        store.save(
            RunRecord(name=name, spec_sha256="0" * 64, status=RunStatus.FINISHED,
                      termination=Termination.COMPLETED, queued_at=now, ended_at=now)
        )  # fmt: skip
    cfg = DaemonConfig(state=state, inbox=state / "inbox", data=state / "data", runs=state / "runs")
    kept = RunKeeper(cfg, store, SYSTEM, lambda line: None, once=False)
    kept.timers = Timers(SYSTEM)
    kept.timers.every("rescan", 30.0, lambda: None)
    kept.refresh()  # the daemon's first step does one
    return kept


def median_ms(work: object, steps: int) -> float:
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        work()  # type: ignore[operator]
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    for runs in (0, args.runs):
        with tempfile.TemporaryDirectory(prefix="bench-loop-") as tmp:
            kept = keeper(Path(tmp), runs)

            def step(k: RunKeeper = kept) -> None:
                k.handle_cancels()
                assert k.timers is not None
                k.timers.run_due()

            per_step = median_ms(step, args.steps)
            refresh = median_ms(kept.refresh, max(args.steps // 20, 3))
            print(
                f"{runs:5d} finished runs: a step {per_step:.3f} ms (median of {args.steps}); "
                f"a queue refresh {refresh:.1f} ms"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
