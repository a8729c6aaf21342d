"""The fitted schedule against what trained: does a budget's fit complete on a quiet machine?

One real `runspec run` of yolo9-t from scratch on the synthetic set (CPU), with far more
`train.epochs` than its wall clock holds and the profile on, so the preflight's profile fits
LibreYOLO's schedule to the budget (runspec.budgetfit). Prints the epochs planned against the
epochs trained, how the run ended, the profile's figures (a training epoch's steps, a
checkpoint save) against the epochs' own mean length, and the budget left at the stop.

    .venv/bin/python bench/bench_fit.py --wall-clock 120
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from runspec.clock import parse_utc_iso

SPEC = """runspec: 1
name: fit
dataset: {{synthetic: {{train: 8, val: 4, imgsz: 64, classes: 3, seed: 0}}}}
train:
  model: yolo9-t
  epochs: {epochs}
  batch: 4
  imgsz: 32
  device: cpu
  save_period: {epochs}
  args: {{pretrained: false, workers: 0, amp: false, patience: 0, no_aug_epochs: 2}}
push: {{dir: pushed}}
budget: {{wall_clock: {wall_clock}s{reserve}}}
preflight: {{doctor: false, profile: true}}
finish: {{action: none}}
env: {{OMP_NUM_THREADS: "1"}}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wall-clock", type=int, default=120)
    parser.add_argument("--epochs", type=int, default=600)
    parser.add_argument("--reserve", type=int, help="budget.reserve (default: auto)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-fit-"))
    reserve = f", reserve: {args.reserve}s" if args.reserve else ""
    spec = work / "fit.yaml"
    spec.write_text(SPEC.format(epochs=args.epochs, wall_clock=args.wall_clock, reserve=reserve))
    state = work / "state"
    proc = subprocess.run(
        [sys.executable, "-m", "runspec", "run", str(spec), "--state", str(state)],
        capture_output=True,
        text=True,
        env={**os.environ},
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"the run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    record = json.loads((state / "jobs" / "fit" / "record.json").read_text())
    fit = record.get("fit") or {}
    status = json.loads((state / "runs" / "fit" / "status.json").read_text())
    rows = [
        json.loads(line)
        for line in (state / "runs" / "fit" / "metrics.jsonl").read_text().splitlines()
        if line.strip()
    ]
    trained = int(record["epoch"])
    mean_epoch = float(status["elapsed_seconds"]) / max(trained, 1)
    steps = sorted(float(r["time"]) for r in rows if "time" in r)
    median_steps = steps[len(steps) // 2] if steps else float("nan")
    deadline = parse_utc_iso(record["deadline"])
    ended = parse_utc_iso(record["ended_at"]) if record.get("ended_at") else deadline
    said = [line for line in proc.stdout.splitlines() if "epochs do not fit" in line]
    print(
        f"planned {fit.get('epochs')} of {args.epochs} epochs; trained {trained}; "
        f"ended: {record.get('termination')}"
    )
    print(
        f"profile: {float(fit.get('epoch_s', 0)):.3f} s of steps per epoch, "
        f"{float(fit.get('save_s', 0)):.3f} s per checkpoint save; trained epochs: "
        f"{mean_epoch:.3f} s each on average (LibreYOLO's own time, median: "
        f"{median_steps:.3f} s)"
    )
    print(f"the run ended {deadline - ended:.1f} s before its deadline")
    for line in said:
        print(f"said: {line.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
