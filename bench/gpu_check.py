"""runspec's GPU path on a real CUDA machine, through runspec's own commands, with figures.

    make gpu-check                          # a checkout with .venv, on a CUDA machine
    python3 bench/gpu_check.py [--out DIR]  # the lent GPU machine: see bench/README.md

Without CUDA (no torch, or torch sees no GPU) it prints one line and exits 0. With CUDA, in
under 5 minutes on one GPU:

1. a synthetic dataset (`python -m runspec.dataset.synthetic`, --images of --data-imgsz px);
2. `runspec preflight --json --collective-one-gpu` of a spec on every GPU (`device: all`): the
   matmul on each GPU against the CPU, the NCCL all_reduce across all of them (one included),
   memory, disk, the doctor and the profiler (verdict, img/s, cost per epoch);
3. `runspec run --json` of yolo9-t from scratch on GPU 0 with `batch: -1` (AutoBatch),
   `amp: true`, pushes to a folder and a `budget.wall_clock` far too short for its epochs, so
   the budget stops it at an epoch boundary;
4. the figures (bench/gpu_figures.py says where each comes from); GPU memory is nvidia-smi's
   memory.used sampled every 0.5 s (torch.cuda.mem_get_info where nvidia-smi is missing).

Exit status: 0 when the preflight passed and the budget stopped the run with its final push
verified, 1 otherwise, 2 when a package it needs is missing. --out DIR keeps figures.json and
the run's record, log and metrics there.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

NAME = "gpu-check"
# Imported by name by runspec, LibreYOLO and the trainer; the lent machine must have each.
NEEDED = (
    "torchvision", "numpy", "PIL", "cv2", "scipy", "yaml", "requests", "typer", "tqdm",
    "jsonschema", "apscheduler", "psutil", "libreyolo", "runspec",
)  # fmt: skip
SHOWN = ("torch", "torchvision", "numpy", "opencv-python-headless", "opencv-python", "scipy",
         "libreyolo", "runspec", "huggingface_hub")  # fmt: skip


def cuda_gpus() -> tuple[int, str]:
    """How many CUDA GPUs torch sees, or 0 and the one line saying why there are none."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a CUDA build on a GPU-less machine may warn
        try:
            import torch
        except ImportError as exc:
            return 0, f"gpu-check: no CUDA here (torch cannot be imported: {exc}); nothing to do"
        if not torch.cuda.is_available():
            return 0, (
                f"gpu-check: no CUDA here (torch {torch.__version__}: "
                "torch.cuda.is_available() is False); nothing to do"
            )
        return torch.cuda.device_count(), ""


def versions() -> str:
    found = []
    for dist in SHOWN:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found.append(f"{dist} {importlib.metadata.version(dist)}")
    return f"Python {sys.version.split()[0]}; " + ", ".join(found)


class GpuSampler(threading.Thread):
    """Used memory (max over GPUs, GiB) and utilisation (mean over GPUs, %) every `period` s,
    stamped with wall time (the run's files give wall times)."""

    def __init__(self, period: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.period = period
        self.samples: list[tuple[float, float, float | None]] = []
        self.total_gib: float | None = None
        self.how = "nvidia-smi memory.used, every 0.5 s"
        self._done = threading.Event()
        self._smi = shutil.which("nvidia-smi")
        if self._smi is None:
            self.how = "torch.cuda.mem_get_info (no nvidia-smi), every 0.5 s"

    def _read(self) -> tuple[float, float | None]:
        if self._smi is not None:
            out = subprocess.run(
                [self._smi, "--query-gpu=memory.used,memory.total,utilization.gpu",
                 "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=10, check=True,
            ).stdout  # fmt: skip
            rows = [[float(v) for v in line.split(",")] for line in out.strip().splitlines()]
            self.total_gib = max(r[1] for r in rows) / 1024
            return max(r[0] for r in rows) / 1024, sum(r[2] for r in rows) / len(rows)
        import torch

        infos = [torch.cuda.mem_get_info(i) for i in range(torch.cuda.device_count())]
        self.total_gib = max(total for _, total in infos) / 2**30
        return max(total - free for free, total in infos) / 2**30, None

    def run(self) -> None:
        while not self._done.is_set():
            try:
                used, util = self._read()
            except (OSError, ValueError, RuntimeError, subprocess.SubprocessError):
                used, util = float("nan"), None
            self.samples.append((time.time(), used, util))
            self._done.wait(self.period)

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=15)

    def peak(self, t0: float, t1: float) -> float | None:
        used = [u for t, u, _ in self.samples if t0 <= t <= t1 and not math.isnan(u)]
        return max(used) if used else None

    def mean_util(self, t0: float, t1: float) -> float | None:
        util = [u for t, _, u in self.samples if t0 <= t <= t1 and u is not None]
        return sum(util) / len(util) if util else None


def train_args(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "pretrained": False,
        "amp": True,
        "workers": args.workers,
        "eval_interval": args.eval_interval,
        "patience": 0,  # LibreYOLO's early stop would end a learn-nothing run before the budget
    }


def spec_doc(args: argparse.Namespace, name: str, data_yaml: Path, **train: Any) -> dict[str, Any]:
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    return {
        "runspec": 1,
        "name": name,
        "dataset": {"path": str(data_yaml)},
        "train": {
            "model": args.model,
            "epochs": args.epochs,
            "imgsz": args.imgsz,
            "args": train_args(args),
            **train,
        },
        "push": {"dir": str(args.work / "pushed")},
        "budget": {
            "wall_clock": f"{args.wall_clock}s",
            "overrun": "1m",
            "hourly_cost": args.hourly_cost,
        },
        # Never end this machine: it is the one running the check.
        "finish": {"action": "none", "unverified": "keep"},
        "preflight": {"profile": name != NAME},
        # A trainer started as a systemd unit gets only the spec's env: it must find the
        # carried packages too.
        **({"env": env} if env else {}),
    }


def runspec(*argv: str) -> list[str]:
    return [sys.executable, "-m", "runspec", *argv]


def run_preflight(args: argparse.Namespace, spec: Path) -> dict[str, Any]:
    state = str(args.work / "state")
    started = time.monotonic()
    proc = subprocess.run(
        runspec("preflight", str(spec), "--state", state, "--json", "--collective-one-gpu",
                "--timeout", "170"),
        capture_output=True, text=True, timeout=200, check=False, cwd=args.work,
    )  # fmt: skip
    wall = time.monotonic() - started
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        print(f"preflight gave no report (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        return {"wall_s": wall, "ok": False, "summary": "no report"}
    counts = {s: sum(1 for c in report["checks"] if c["status"] == s) for s in ("pass", "warn")}
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    for c in report["checks"]:
        print(f"  {c['status'].upper():4}  {c['name']}: {c['message']}")
    profile = next((c["message"] for c in report["checks"] if c["name"] == "profile"), None)
    return {
        "wall_s": wall,
        "ok": proc.returncode == 0,
        "summary": f"{counts['pass']} passed, {counts['warn']} warned, {len(failed)} failed",
        "profile": profile,
        "report": report,
    }


def run_training(args: argparse.Namespace, spec: Path) -> int:
    """`runspec run --json`, its progress lines shown as they come; bounded by the budget."""
    proc = subprocess.Popen(
        runspec("run", str(spec), "--state", str(args.work / "state"), "--json",
                "--finish-dry-run"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=args.work,
    )  # fmt: skip

    def overdue() -> None:
        # runspec run's own rule: a first signal stops at the boundary and pushes, a second
        # one ends the trainer now.
        for _ in range(2):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
            time.sleep(2)

    timer = threading.Timer(args.wall_clock + 60 + 60, overdue)  # + overrun + a minute
    timer.start()
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            print(f"  | {line.rstrip()}", flush=True)
        return proc.wait(timeout=60)
    finally:
        timer.cancel()


def keep(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "figures.json").write_text(json.dumps(figures, indent=2) + "\n")
    job, run_dir = args.work / "state" / "jobs" / NAME, args.work / "state" / "runs" / NAME
    for src in (job / "record.json", job / "runspec.log", run_dir / "metrics.jsonl",
                run_dir / "train_config.yaml", run_dir / "train.log"):  # fmt: skip
        if src.is_file():
            shutil.copyfile(src, out / src.name)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep figures.json and the run's files here")
    parser.add_argument("--work", type=Path, help="work folder (default: a new temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder afterwards")
    parser.add_argument("--model", default="yolo9-t", help="trained from scratch (yolo9-t/s)")
    parser.add_argument("--images", type=int, default=4096, help="synthetic training images")
    parser.add_argument("--data-imgsz", type=int, default=256, help="their size in pixels")
    parser.add_argument("--imgsz", type=int, default=640, help="train.imgsz")
    parser.add_argument("--epochs", type=int, default=100, help="more than the budget allows")
    parser.add_argument("--eval-interval", type=int, default=3, help="validate every N epochs")
    parser.add_argument("--workers", type=int, default=8, help="data loader workers")
    parser.add_argument("--wall-clock", type=int, default=120, help="budget.wall_clock, s")
    parser.add_argument("--hourly-cost", type=float, default=3.5, help="USD/h, for the cost")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="rehearse every step on the CPU (device: cpu, no GPU figures) before spending "
        "GPU minutes; with small --images, --imgsz and --wall-clock",
    )
    return parser.parse_args()


def make_dataset(args: argparse.Namespace) -> Path:
    """runspec.dataset.synthetic in one process per shard (it is single-threaded and the GPU waits),
    joined by one data.yaml listing every shard's training folder; shard 0 holds the val split."""
    root: Path = args.work / "data"
    shards = max(1, min(8, os.cpu_count() or 1, args.images // 64))
    procs = []
    for i in range(shards):
        count = args.images // shards + (1 if i < args.images % shards else 0)
        val = max(args.images // 16, 8) if i == 0 else 1
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "runspec.dataset.synthetic", str(root / f"shard{i}"),
             "--train", str(count), "--val", str(val), "--imgsz", str(args.data_imgsz),
             "--seed", str(i)],
            stdout=subprocess.DEVNULL, cwd=args.work,
        ))  # fmt: skip
    if any([proc.wait() for proc in procs]):  # a list: wait for every shard
        raise SystemExit("gpu-check: generating the synthetic dataset failed")
    data_yaml = root / "data.yaml"
    data_yaml.write_text(
        f"path: {root}\ntrain:\n"
        + "".join(f"  - shard{i}/images/train\n" for i in range(shards))
        + "val: shard0/images/val\nnc: 3\nnames: {0: class0, 1: class1, 2: class2}\n"
    )
    return data_yaml


def write_specs(args: argparse.Namespace, data_yaml: Path, gpus: int) -> tuple[Path, Path]:
    import yaml

    if args.cpu:
        pre = spec_doc(args, f"{NAME}-preflight", data_yaml, device="cpu", batch=-1)
        run = spec_doc(args, NAME, data_yaml, device="cpu", batch=-1)
    else:
        batch = -1 if gpus == 1 else 32 * gpus  # -1 (AutoBatch) sizes one GPU only
        pre = spec_doc(args, f"{NAME}-preflight", data_yaml, device="all", batch=batch)
        run = spec_doc(args, NAME, data_yaml, device="0", batch=-1)
    paths = args.work / "preflight.yaml", args.work / "run.yaml"
    for path, doc in zip(paths, (pre, run), strict=True):
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return paths


def main() -> int:
    args = parse_args()
    started = time.monotonic()
    gpus, why = (0, "") if args.cpu else cuda_gpus()
    if not gpus and not args.cpu:
        print(why)
        return 0
    machine = f"{'CPU rehearsal' if args.cpu else f'{gpus} CUDA GPU(s)'}; {versions()}"
    print(f"gpu-check: {machine}", flush=True)
    missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
    if missing:
        print(f"gpu-check: missing here: {', '.join(missing)} (see bench/README.md)")
        return 2
    import gpu_figures

    args.work = (args.work or Path(tempfile.mkdtemp(prefix="gpu-check-"))).absolute()
    args.work.mkdir(parents=True, exist_ok=True)
    sampler = GpuSampler()
    if not args.cpu:
        sampler.start()
    t0 = time.time()
    data_yaml = make_dataset(args)
    print(f"dataset: {args.images} training images in {time.time() - t0:.1f} s", flush=True)
    pre_spec, run_spec = write_specs(args, data_yaml, gpus)
    print("preflight:", flush=True)
    t1 = time.time()
    pre = run_preflight(args, pre_spec)
    t2 = time.time()
    print(f"run: {args.model}, budget.wall_clock {args.wall_clock} s", flush=True)
    code = run_training(args, run_spec)
    t3 = time.time()
    if not args.cpu:
        sampler.stop()
    files = gpu_figures.RunFiles.read(args.work / "state", NAME)
    training = gpu_figures.training_window(files) or (t2, t3)
    figures: dict[str, Any] = {
        "machine": machine,
        "model": args.model,
        "train_images": args.images,
        "hourly_cost": args.hourly_cost,
        "train_config": {k: files.train_config.get(k) for k in ("batch", "imgsz", "amp")},
        "preflight": pre,
        "epochs": gpu_figures.epoch_figures(files.rows, args.images),
        "budget": gpu_figures.budget_figures(files, args.eval_interval),
        "idle": gpu_figures.idle_figures(files, args.hourly_cost),
        "gpu": {
            "how": "no GPU (--cpu)" if args.cpu else sampler.how,
            "total_gib": sampler.total_gib,
            "preflight_peak_gib": sampler.peak(t1, t2),
            "run_peak_gib": sampler.peak(t2, t3),
            "training_util_pct": sampler.mean_util(*training),
        },
        "run_exit": code,
        "total_s": time.monotonic() - started,
    }
    for line in gpu_figures.render(figures):
        print(line)
    if args.out:
        keep(args, figures)
    if not args.keep:
        shutil.rmtree(args.work, ignore_errors=True)
    ok = pre["ok"] and code == 0 and figures["budget"]["termination"] == "budget"
    if not ok:
        print("gpu-check: FAILED (a preflight check failed, or the run did not end by its budget)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
