"""How much runspec's trainer costs over bare LibreYOLO: wall time and peak memory.

The same tiny run (yolo9-t from scratch on the synthetic set, CPU) through runspec's launcher
and trainer, and through `libreyolo train`, in alternating pairs. Prints each pair, the median
wall-time ratio (goal: at most 1.05) and each side's peak RSS (the whole process tree, sampled).
Each pair also times the whole `runspec run` (preflight child, staging, trainer, a push to a
folder; a run with no push exits 3, its weights unverified): its
ratio shows what the preflight's own torch import adds to a tiny run.

    .venv/bin/python bench/bench_trainer.py --pairs 5 --epochs 3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType

import psutil

from runspec.dataset.synthetic import generate
from runspec.spec.model import BudgetSpec, DatasetSpec, Spec, SyntheticDataset, TrainSpec
from runspec.store.paths import RunPaths
from runspec.trainer.control import TrainJob
from runspec.trainer.launcher import start

DATA = SyntheticDataset(train=8, val=4, imgsz=64, classes=3, seed=0)
ARGS = {"pretrained": False, "workers": 0, "eval_interval": 1, "patience": 0, "amp": False}
SAMPLE_S = 0.05


def _tree_rss(root: psutil.Process) -> int:
    total = 0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total


def _watch(pid: int, done: Callable[[], bool]) -> tuple[float, int]:
    """Sample the tree's RSS until done(); return (seconds, peak bytes)."""
    start_t = time.monotonic()
    root = psutil.Process(pid)
    peak = 0
    while not done():
        peak = max(peak, _tree_rss(root))
        time.sleep(SAMPLE_S)
    return time.monotonic() - start_t, peak


def _children_cpu() -> float:
    """CPU seconds of every reaped child so far: robust where wall time is at the mercy of
    whatever else the machine runs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_runspec(work: Path, data_yaml: Path, epochs: int, tag: str) -> tuple[float, int]:
    spec = Spec(
        name=f"rs-{tag}",
        dataset=DatasetSpec(synthetic=DATA),
        train=TrainSpec(
            model="yolo9-t",
            epochs=epochs,
            batch=4,
            imgsz=32,
            device="cpu",
            save_period=1,
            args=MappingProxyType(ARGS),
        ),
        budget=BudgetSpec(wall_clock=3600.0),
    )
    paths = RunPaths.for_spec(spec, work / "state")
    t0 = time.monotonic()
    handle = start(TrainJob.from_spec(spec, paths, data_yaml), paths)
    _, peak = _watch(handle.identity.pid, lambda: not handle.alive())
    wall = time.monotonic() - t0
    # The launcher never waits for its trainer (it reads the result file): reap it here, or
    # its CPU reaches RUSAGE_CHILDREN only whenever a later Popen happens to reap it.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(handle.identity.pid, 0)
    result = handle.result()
    assert result is not None and result.outcome.value == "completed", result
    return wall, peak


def run_full(work: Path, data_yaml: Path, epochs: int, tag: str) -> tuple[float, int]:
    spec_file = work / f"full-{tag}.yaml"
    spec_file.write_text(
        f"""runspec: 1
name: full-{tag}
dataset: {{path: {data_yaml}}}
train:
  model: yolo9-t
  epochs: {epochs}
  batch: 4
  imgsz: 32
  device: cpu
  save_period: 1
  args: {{pretrained: false, workers: 0, eval_interval: 1, patience: 0, amp: false}}
budget: {{wall_clock: 1h}}
preflight: {{doctor: false}}
push: {{dir: {work / "pushed"}}}
"""
    )
    argv = [sys.executable, "-m", "runspec", "run", str(spec_file), "--state", str(work / "full")]
    t0 = time.monotonic()
    with open(work / f"full-{tag}.log", "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        _, peak = _watch(proc.pid, lambda: proc.poll() is not None)
    wall = time.monotonic() - t0
    assert proc.returncode == 0, f"runspec run failed: see {work / f'full-{tag}.log'}"
    return wall, peak


def run_cli(work: Path, data_yaml: Path, epochs: int, tag: str) -> tuple[float, int]:
    exe = Path(sys.executable).with_name("libreyolo")
    argv = [
        str(exe),
        "train",
        f"data={data_yaml}",
        "model=yolo9-t",
        f"epochs={epochs}",
        "batch=4",
        "imgsz=32",
        "device=cpu",
        "save_period=1",
        f"project={work / 'cli'}",
        f"name=cli-{tag}",
        "exist_ok=true",
        *(f"{k}={str(v).lower()}" for k, v in ARGS.items()),
    ]
    weights = work / "cli-weights"
    weights.mkdir(exist_ok=True)
    t0 = time.monotonic()
    with open(work / f"cli-{tag}.log", "wb") as log:
        proc = subprocess.Popen(argv, cwd=weights, stdout=log, stderr=subprocess.STDOUT)
        _, peak = _watch(proc.pid, lambda: proc.poll() is not None)
    wall = time.monotonic() - t0
    assert proc.returncode == 0, f"libreyolo train failed: see {work / f'cli-{tag}.log'}"
    return wall, peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-trainer-"))
    data_yaml = generate(work / "data", DATA)
    print(f"work folder {work}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    ratios: list[float] = []
    peaks_rs: list[int] = []
    peaks_cli: list[int] = []
    cpu_ratios: list[float] = []
    full_ratios: list[float] = []
    for i in range(args.pairs):
        # Alternate who goes first, so a warming disk cache favours neither.
        order = ("runspec", "cli") if i % 2 == 0 else ("cli", "runspec")
        got: dict[str, tuple[float, int]] = {}
        cpu: dict[str, float] = {}
        for side in order:
            runner = run_runspec if side == "runspec" else run_cli
            before = _children_cpu()
            got[side] = runner(work, data_yaml, args.epochs, str(i))
            cpu[side] = _children_cpu() - before
        (rs_wall, rs_peak), (cli_wall, cli_peak) = got["runspec"], got["cli"]
        full_wall, full_peak = run_full(work, data_yaml, args.epochs, str(i))
        full_ratios.append(full_wall / cli_wall)
        print(
            f"pair {i + 1}: runspec run (whole lifecycle) {full_wall:6.2f}s "
            f"{full_peak / 2**20:7.0f} MiB"
        )
        ratios.append(rs_wall / cli_wall)
        cpu_ratios.append(cpu["runspec"] / cpu["cli"])
        peaks_rs.append(rs_peak)
        peaks_cli.append(cli_peak)
        print(
            f"pair {i + 1}: runspec {rs_wall:6.2f}s {rs_peak / 2**20:7.0f} MiB | "
            f"libreyolo train {cli_wall:6.2f}s {cli_peak / 2**20:7.0f} MiB | "
            f"ratio {rs_wall / cli_wall:.3f} | CPU {cpu['runspec']:.1f}s vs {cpu['cli']:.1f}s"
        )
    print(
        f"median wall-time ratio runspec/libreyolo: {statistics.median(ratios):.3f} "
        f"(goal <= 1.05) over {args.pairs} pairs of {args.epochs} epochs"
    )
    print(f"median CPU-time ratio runspec/libreyolo: {statistics.median(cpu_ratios):.3f}")
    print(
        "median wall-time ratio `runspec run`/libreyolo (preflight included): "
        f"{statistics.median(full_ratios):.3f}"
    )
    print(
        f"peak RSS (process tree), max over pairs: runspec {max(peaks_rs) / 2**20:.0f} MiB, "
        f"libreyolo train {max(peaks_cli) / 2**20:.0f} MiB"
    )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
