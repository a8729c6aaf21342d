"""Real budget runs: how far before the deadline the finish starts, and how much budget the stop
left unused.

Each run is a real `runspec run` of yolo9-t from scratch on the synthetic set (CPU) with far
more epochs than its wall clock allows, pushing to a folder and finishing with a command that
records when it ran. Prints, per run and as medians: seconds from the finish to the deadline,
the budget left unused at the stop (the time the last stop left before the point of no return
where another epoch would have gone), and that figure in epochs plus the reserve.

    .venv/bin/python bench/bench_budget_runs.py --runs 3 --wall-clock 75 --reserve 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from runspec.clock import parse_utc_iso


def one_run(work: Path, i: int, wall_clock: int, reserve: int) -> dict[str, float]:
    marker = work / f"finished-{i}"
    spec = work / f"budget-{i}.yaml"
    spec.write_text(
        f"""runspec: 1
name: budget-{i}
dataset: {{synthetic: {{train: 8, val: 4, imgsz: 64, classes: 3, seed: 0}}}}
train:
  model: yolo9-t
  epochs: 10000
  batch: 4
  imgsz: 32
  device: cpu
  save_period: 1000
  args: {{pretrained: false, workers: 0, eval_interval: 5, amp: false, patience: 0}}
push: {{dir: pushed}}
budget: {{wall_clock: {wall_clock}s, reserve: {reserve}s}}
preflight: {{doctor: false}}
finish: {{action: command, command: [touch, {marker}]}}
env: {{OMP_NUM_THREADS: "1"}}
"""
    )
    state = work / "state"
    proc = subprocess.run(
        [sys.executable, "-m", "runspec", "run", str(spec), "--state", str(state)],
        capture_output=True,
        text=True,
        env={**os.environ},
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"run {i} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    record = json.loads((state / "jobs" / f"budget-{i}" / "record.json").read_text())
    deadline = parse_utc_iso(record["deadline"])
    finish_started = parse_utc_iso(record["finish"]["started_at"])
    # The last epoch boundary, to the trainer's own (sub-second) clock.
    epoch_marker = state / "jobs" / f"budget-{i}" / "control" / "epoch.json"
    stop_time = float(json.loads(epoch_marker.read_text())["time"])
    epochs = [
        json.loads(line)
        for line in (state / "runs" / f"budget-{i}" / "metrics.jsonl").read_text().splitlines()
    ]
    longest = max(float(e["time"]) for e in epochs)
    unused = deadline - reserve - stop_time  # what the stop left before the point of no return
    return {
        "epochs": float(record["epoch"]),
        "finish_before_deadline_s": deadline - finish_started,
        "unused_s": unused,
        "unused_epochs": unused / longest,
        "longest_epoch_s": longest,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--wall-clock", type=int, default=75)
    parser.add_argument("--reserve", type=int, default=20)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-budget-"))
    rows = []
    for i in range(args.runs):
        row = one_run(work, i, args.wall_clock, args.reserve)
        rows.append(row)
        print(
            f"run {i + 1}: {row['epochs']:.0f} epochs; finish {row['finish_before_deadline_s']:.1f}"
            f" s before the deadline; stop left {row['unused_s']:.1f} s "
            f"({row['unused_epochs']:.2f} of its longest epoch, {row['longest_epoch_s']:.1f} s) "
            "before the point of no return"
        )

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    print(
        f"median over {len(rows)} runs: finish {med('finish_before_deadline_s'):.1f} s before "
        f"the deadline (goal > 0); unused budget at the stop {med('unused_s'):.1f} s = "
        f"{med('unused_epochs'):.2f} epochs + the {args.reserve} s reserve "
        "(goal: under one epoch plus the reserve)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
