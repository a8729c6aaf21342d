"""LibreYOLO's profiler for a few steps: the bottleneck, images per second, cost per epoch.

The LibreYOLO guide's point: $/hour is the wrong figure to optimise. When the verdict is
`dataloader` or `host / launch`, a faster GPU buys nothing; more workers or a bigger batch do.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import yaml

from runspec.budget import deadline_of
from runspec.budgetfit import (
    BYTES_FIGURE,
    LEFT_FIGURE,
    PROFILE_FIGURE,
    SAVE_FIGURE,
    START_FIGURE,
    end_reserve,
    epochs_for_figures,
    from_figures,
)
from runspec.checkresult import CheckResult, failed, passed, warned
from runspec.clock import SYSTEM, human_duration
from runspec.errors import RunspecError
from runspec.spec.model import BudgetFit, Spec
from runspec.store.paths import RunPaths
from runspec.store.state import RecordStore, RunStatus
from runspec.trainer.control import TrainJob
from runspec.trainer.heavyimports import heavy_imports

PROFILE_WARMUP = 2
PROFILE_STEPS = 5
# A profiling child reaches its profile within this of its start (its imports take seconds).
BORN_WITHIN_S = 120.0
# A LibreYOLO checkpoint holds the model about four times over (trainer.py `_save_checkpoint`:
# the EMA's weights, the raw ones, the EMA's state, and the optimizer's, about one more).
CHECKPOINT_COPIES = 4
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"}
ADVICE = {
    "dataloader": "the GPU waits for data: a faster GPU buys nothing; raise train.args.workers "
    "or cache images (cache: ram)",
    "host / launch": "the GPU waits for the CPU launching kernels: a faster GPU buys nothing; "
    "a bigger batch or cuda_graph: true does",
    "compute": "the GPU is the bottleneck: a faster GPU would shorten epochs; compare cost per "
    "epoch, not $/hour",
    "memory-pressure": "the allocator is thrashing: lower the batch or imgsz",
}


def train_images(data_yaml: Path) -> int | None:
    """How many training images the data.yaml names (None when it cannot tell)."""
    try:
        cfg = yaml.safe_load(data_yaml.read_text())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(cfg, dict) or "train" not in cfg:
        return None
    root = Path(str(cfg.get("path") or data_yaml.parent))
    root = root if root.is_absolute() else data_yaml.parent / root
    splits = cfg["train"] if isinstance(cfg["train"], list) else [cfg["train"]]
    count = 0
    for split in splits:
        where = root / str(split)
        if where.is_dir():
            count += sum(1 for p in where.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
        elif where.is_file() and where.suffix == ".txt":
            count += sum(1 for line in where.read_text().splitlines() if line.strip())
    return count or None


def _profile(
    spec: Spec, paths: RunPaths, data_yaml: Path, project: Path, warmup: int, steps: int
) -> dict[str, Any]:
    """LibreYOLO's profile summary, `checkpoint`: one checkpoint save's seconds and bytes, and
    `start`: the seconds from this child's start to LibreYOLO's training start (its imports,
    the model's build, LibreYOLO's setup: what a trainer takes before its first step)."""
    called = time.time()
    # torch and libreyolo, only when the profile is asked for
    with heavy_imports():
        from runspec.trainer.modelbuild import build_model, resolve_device  # noqa: PLC0415

    started = _Started()
    job = TrainJob.from_spec(spec, paths, data_yaml)
    device = resolve_device(job.device)
    if "," in device:
        device = device.split(",", maxsplit=1)[0]  # the profiler is off under DDP: one GPU
    model = build_model(job, device, job.args.get("pretrained", True))
    args = {k: v for k, v in job.args.items() if k in ("workers", "amp", "cache")}
    model.train(
        data=job.data,
        epochs=warmup + steps + 5,  # profile_then_stop ends it sooner
        # -1 as training has it: on a GPU LibreYOLO's AutoBatch sizes the profiled steps as it
        # will size training's (on a CPU it keeps 16), so img/s and the cost per epoch are
        # those of the real run, not of a batch it will never use.
        batch=job.batch,
        imgsz=list(job.imgsz) if isinstance(job.imgsz, tuple) else job.imgsz,
        device=device,
        profile=True,
        profile_then_stop=True,
        profile_warmup=warmup,
        profile_steps=steps,
        profile_open=False,
        callbacks=[started],
        no_aug_epochs=0,
        project=str(project),
        name="prof",
        exist_ok=True,
        **args,
    )
    found = project / "prof" / "profile.json"
    if not found.is_file():
        found = project / "prof" / "profile_summary.json"
    loaded: dict[str, Any] = json.loads(found.read_text())
    if started.at is not None:
        # From this child's start, its imports included, as a trainer's start pays them; a
        # process that lived long before this call (a caller in-process) counts from the call.
        born = psutil.Process().create_time()
        loaded["start"] = started.at - (born if called - born < BORN_WITHIN_S else called)
    loaded["checkpoint"] = checkpoint_cost(model.model, _on_the_runs_disk(paths))
    return loaded


class _Started:
    """LibreYOLO callback: when training started, its setup done."""

    def __init__(self) -> None:
        self.at: float | None = None

    def on_train_start(self, event: Any) -> None:
        self.at = time.time()


def _on_the_runs_disk(paths: RunPaths) -> Path:
    """The nearest folder that exists on the way to the run folder: a save there costs what
    the trainer's will (a /tmp in memory would not). The preflight creates no folder for it."""
    where = paths.run_dir
    while not where.is_dir() and where != where.parent:
        where = where.parent
    return where


def checkpoint_cost(module: Any, near: Path) -> tuple[float, int]:
    """Seconds and bytes of one save of a checkpoint the size of LibreYOLO's (CHECKPOINT_COPIES
    of `module`'s weights, each its own storage as in the real one), written beside `near`."""
    import torch  # noqa: PLC0415 (loaded already: the profile trained with it)

    weights = {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}
    copies = {
        f"copy{i}": {k: v.clone() for k, v in weights.items()} for i in range(CHECKPOINT_COPIES)
    }
    with tempfile.TemporaryDirectory(prefix=".runspec-profile-", dir=near) as tmp:
        probe = Path(tmp) / "checkpoint.pt"
        start = time.perf_counter()
        torch.save(copies, probe)
        took = time.perf_counter() - start
        return took, probe.stat().st_size


def seconds_left(spec: Spec, paths: RunPaths) -> float:
    """The budget the fit is planned for: what is left of a run under way (its preflight and
    staging count), else the whole wall clock (`runspec preflight` before a run)."""
    try:
        record = RecordStore(paths.state).load(paths.name)
    except (RunspecError, OSError, ValueError):
        record = None
    if record is None or record.deadline is None or record.status is RunStatus.FINISHED:
        return spec.budget.wall_clock
    return deadline_of(record) - SYSTEM.time()


def fit_text(spec: Spec, figures: dict[str, float]) -> tuple[str, bool]:
    """`your 100 epochs do not fit: training 38, the schedule fitted to them` (or, with fit:
    none, `about 38 of your 100 epochs fit in the 6h00m wall clock`), and whether all do: the
    count the run fits to (runspec.budgetfit), for the budget left (LEFT_FIGURE)."""
    left = figures[LEFT_FIGURE]
    fit, total = epochs_for_figures(spec, figures.get, left), spec.train.epochs
    wall = f"{human_duration(spec.budget.wall_clock)} wall clock"
    if left < spec.budget.wall_clock:
        wall = f"{human_duration(max(left, 0))} left of the {wall}"
    if fit < 1:
        reserve = human_duration(end_reserve(spec, int(figures.get(BYTES_FIGURE, 0))))
        return (
            f"not even one of your {total} epochs fits in the {wall} with the end's reserve "
            f"of {reserve}: the run would end with no weights",
            False,
        )
    if fit >= total:
        return f"all {total} of your {total} epochs fit in the {wall}", True
    fitted = from_figures(spec, figures.get, left)
    if fitted is not None:
        return f"{fitted.line()} ({wall})", False
    return f"about {fit} of your {total} epochs fit in the {wall}", False


def profile_check(
    spec: Spec,
    paths: RunPaths,
    data_yaml: Path,
    warmup: int = PROFILE_WARMUP,
    steps: int = PROFILE_STEPS,
) -> CheckResult:
    """Profile `steps` training steps after `warmup`; bounded by the preflight's hard timeout."""
    if not data_yaml.is_file():
        return warned(
            "profile",
            f"the dataset is not staged yet ({data_yaml} missing): not profiled",
            "the run profiles it after staging",
        )
    with tempfile.TemporaryDirectory(prefix="runspec-profile-") as tmp:
        try:
            summary = _profile(spec, paths, data_yaml, Path(tmp), warmup, steps)
        except (OSError, ValueError, RuntimeError) as exc:
            return failed(
                "profile",
                f"profiling {steps} steps failed: {str(exc).splitlines()[0]}",
                "training would fail the same way: see the message, or set preflight.profile: "
                "false to go ahead",
            )
    bound = str(summary.get("bound") or summary.get("metrics", {}).get("bound") or "unknown")
    all_fit = True
    figures: dict[str, float] = {}
    rate = summary.get("img_per_s") or summary.get("real", {}).get("img_per_s")
    parts = [f"verdict {bound}"]
    batch = (summary.get("config") or summary.get("meta") or {}).get("batch")
    if isinstance(batch, int):
        parts.append(f"batch {batch}" + (" (auto)" if spec.train.batch == -1 else ""))
    if isinstance(rate, int | float) and rate > 0:
        parts.append(f"{rate:.1f} img/s")
        images = train_images(data_yaml)
        if images:
            epoch_s = images / rate
            save_s, size = summary["checkpoint"]
            left = seconds_left(spec, paths)
            figures.update(
                {
                    PROFILE_FIGURE: epoch_s,
                    SAVE_FIGURE: save_s,
                    BYTES_FIGURE: size,
                    LEFT_FIGURE: left,
                }
            )
            if isinstance(summary.get("start"), float):
                figures[START_FIGURE] = summary["start"]
            parts.append(f"about {human_duration(epoch_s)} per epoch of {images} images")
            parts.append(f"{save_s:.2f} s per checkpoint save")
            if spec.budget.hourly_cost:
                parts.append(f"${epoch_s / 3600 * spec.budget.hourly_cost:.4f} per epoch")
            fits, all_fit = fit_text(spec, figures)
            # The answer first: the figures above are how it was reached.
            parts.insert(0, fits)
    advice = ADVICE.get(bound, "")
    message = ", ".join(parts) + (f"; {advice}" if advice else "")
    if not all_fit:
        fix = (
            "to train them all, raise budget.wall_clock; budget.fit: none keeps train.epochs "
            "and lets the budget cut the schedule"
            if spec.budget.fit is not BudgetFit.NONE
            else "the budget stops training early: raise budget.wall_clock or lower "
            "train.epochs (validation epochs take longer than these training steps)"
        )
        return replace(warned("profile", message, fix), figures=figures)
    if bound == "dataloader":
        check = warned("profile", message, "raise train.args.workers before paying for more GPU")
        return replace(check, figures=figures)
    return replace(passed("profile", message), figures=figures)
