"""The preflight's wall time on this machine (CPU), without the doctor and the profiler.

    .venv/bin/python bench/bench_preflight.py [--runs 5] [--device cpu] [--scratch]

Times `run_preflight(spec, paths, "all", ...)` end to end, child process, torch import and
every machine check included, as the lifecycle calls it. Prints each run and the median;
asserts nothing (goal: median under 10 s here). With pretrained weights (the default) the
weights check looks the model up in LibreYOLO, which imports every family it has; --scratch
trains from scratch, as the tests do, and skips that.
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

from runspec.preflight import run_preflight  # noqa: E402
from runspec.spec.loader import load_spec  # noqa: E402
from runspec.store.paths import RunPaths  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", default="cpu", help="train.device of the spec (cpu, 0, all)")
    parser.add_argument(
        "--scratch", action="store_true", help="pretrained: false (no weights to look up)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-preflight-") as tmp:
        root = Path(tmp)
        spec_path = root / "bench.yaml"
        spec_path.write_text(
            "runspec: 1\nname: bench-preflight\ndataset:\n  synthetic: {}\n"
            f"train: {{model: yolo9-t, epochs: 30, device: '{args.device}'"
            + (", args: {pretrained: false}" if args.scratch else "")
            + "}\n"
            f"push: {{dir: {root / 'volume'}}}\n"
            "budget: {wall_clock: 1h}\npreflight: {doctor: false, profile: false}\n"
        )
        spec = load_spec(spec_path)
        paths = RunPaths.for_spec(spec, root / "state")
        times = []
        for i in range(args.runs):
            started = time.monotonic()
            report = run_preflight(spec, paths, "all", timeout=120)
            took = time.monotonic() - started
            times.append(took)
            states = " ".join(f"{c.name}={c.status.value}" for c in report.checks)
            print(f"run {i + 1}: {took:.2f} s  ({states})")
        print(
            f"preflight wall time, {args.runs} runs: median {statistics.median(times):.2f} s, "
            f"min {min(times):.2f} s, max {max(times):.2f} s (goal < 10 s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
