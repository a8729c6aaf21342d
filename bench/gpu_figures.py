"""The figures `gpu_check.py` prints, read from what a finished `runspec run` left behind.

Sources, all written by runspec or LibreYOLO during the run (nothing here measures anything):

    <state>/jobs/<name>/record.json          the run record: start, deadline, end, history
    <state>/jobs/<name>/runspec.log          the lifecycle's lines (the planner's stop decision)
    <state>/jobs/<name>/control/epoch.json   the last epoch marker (when that epoch ended)
    <state>/jobs/<name>/control/deadline     the last stop time and next-epoch predictions
    <state>/jobs/<name>/control/result.json  how the trainer ended
    <run_dir>/metrics.jsonl                  LibreYOLO's epoch rows ("time": train + validation)
    <run_dir>/status.json                    LibreYOLO's status (started_at: training began)
    <run_dir>/train_config.yaml              the resolved config (AutoBatch's batch, amp)

Record times have one-second resolution, so the idle figures are good to about a second.
Light: stdlib, PyYAML and runspec's torch-free modules only.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from runspec.budget import validates
from runspec.clock import parse_utc_iso
from runspec.cost import run_cost
from runspec.store.paths import StateLayout
from runspec.store.state import RunRecord
from runspec.trainer.observer import read_epochs

# The supervisor's line when the planner asks the trainer to stop (runspec/run/supervise.py).
_PLANNER_STOP = re.compile(r"budget: epoch (\d+) may not leave time")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class RunFiles:
    record: RunRecord
    rows: list[dict[str, Any]]  # metrics.jsonl, one row per epoch
    status: dict[str, Any]
    result: dict[str, Any]
    deadline: dict[str, Any]
    marker: dict[str, Any]
    train_config: dict[str, Any]
    log: str

    @classmethod
    def read(cls, state: Path, name: str) -> RunFiles:
        job = state / "jobs" / name
        record = RunRecord.from_json(json.loads((job / "record.json").read_text()))
        run_dir = StateLayout(state).run_paths(name).run_dir
        try:
            config = yaml.safe_load((run_dir / "train_config.yaml").read_text())
        except (OSError, yaml.YAMLError):
            config = None
        try:
            log = (job / "runspec.log").read_text()
        except OSError:
            log = ""
        return cls(
            record=record,
            rows=read_epochs(run_dir),
            status=_json(run_dir / "status.json") or {},
            result=_json(job / "control" / "result.json") or {},
            deadline=_json(job / "control" / "deadline") or {},
            marker=_json(job / "control" / "epoch.json") or {},
            train_config=config if isinstance(config, dict) else {},
            log=log,
        )


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def epoch_figures(rows: list[dict[str, Any]], train_images: int) -> dict[str, Any]:
    """Epoch lengths as LibreYOLO timed them; the first apart (workers start, kernels tune)."""
    times = [(int(r["epoch"]), float(r.get("time") or 0.0), bool(r.get("validated"))) for r in rows]
    later = [t for t in times if t[0] > 1]
    plain = _median([s for _, s, v in later if not v])
    validating = _median([s for _, s, v in later if v])
    steady = plain if plain is not None else validating
    return {
        "epochs": len(times),
        "first_epoch_s": times[0][1] if times else None,
        "plain_epoch_s": plain,
        "validating_epoch_s": validating,
        "images_per_s": train_images / steady if steady else None,
    }


def _last_epoch_that_fits(
    after: int,
    ended_at: float,
    stop_at: float,
    total: int,
    eval_interval: int,
    lengths: dict[bool, float | None],
) -> int:
    """The last epoch that would have ended by `stop_at`, had epochs after `after` taken the
    lengths measured for their kind (validating or not)."""
    epoch, now = after, ended_at
    while epoch < total:
        length = lengths.get(validates(epoch + 1, total, eval_interval))
        if length is None or now + length > stop_at:
            break
        epoch, now = epoch + 1, now + length
    return epoch


def budget_figures(files: RunFiles, eval_interval: int) -> dict[str, Any]:
    record, result = files.record, files.result
    trained = int(result.get("epochs_completed") or record.epoch)
    total = int(files.marker.get("total_epochs") or record.total_epochs)
    planned: int | None = None
    found = _PLANNER_STOP.findall(files.log)
    if found:
        planned = int(found[0]) - 1  # the planner's decision came after this epoch
    elif result.get("reason") == "deadline":
        planned = trained  # the trainer decided at its own boundary
    figures: dict[str, Any] = {
        "termination": record.termination.value if record.termination else None,
        "why": record.why,
        "stopped_by": result.get("reason"),
        "stop_detail": result.get("detail"),
        "total_epochs": total,
        "trained_last_epoch": trained,
        "planned_last_epoch": planned,
        "predicted_next_epoch_s": {
            kind: round(float(s), 2)
            for kind, s in (files.deadline.get("next_epoch_s") or {}).items()
        },
    }
    if record.deadline and record.started_at:
        start, deadline = parse_utc_iso(record.started_at), parse_utc_iso(record.deadline)
        figures["wall_clock_s"] = deadline - start
        if record.ended_at:
            figures["finish_margin_s"] = deadline - parse_utc_iso(record.ended_at)
        stop_at = files.deadline.get("deadline")
        if isinstance(stop_at, int | float):
            figures["reserve_s"] = deadline - float(stop_at)
            ended = files.marker.get("time")
            epochs = epoch_figures(files.rows, 1)
            lengths = {True: epochs["validating_epoch_s"], False: epochs["plain_epoch_s"]}
            if isinstance(ended, int | float) and trained < total:
                figures["fits_last_epoch"] = _last_epoch_that_fits(
                    trained, float(ended), float(stop_at), total, eval_interval, lengths
                )
    return figures


def idle_figures(files: RunFiles, hourly_cost: float | None) -> dict[str, Any]:
    """Billed seconds with the GPU idle: before training (preflight, staging), the trainer's
    start-up (imports, model, AutoBatch, data loaders: until LibreYOLO's on_train_start), and
    after training (final push, finish). runspec.cost does the arithmetic from the history."""
    record = files.record
    if record.started_at is None:
        return {"billed_s": 0.0, "usd": None, "before_training_s": 0.0, "after_training_s": 0.0,
                "idle_by_status": {}}  # fmt: skip
    end = parse_utc_iso(record.ended_at or record.started_at)
    cost = run_cost(record, hourly_cost, end)
    idle = cost.idle_by_status
    figures: dict[str, Any] = {
        "billed_s": cost.billed_s,
        "usd": cost.usd,
        "before_training_s": idle.get("preflight", 0.0) + idle.get("staging", 0.0),
        "after_training_s": idle.get("pushing", 0.0) + idle.get("finishing", 0.0),
        "idle_by_status": dict(idle),
    }
    entered = [h.time for h in record.history if h.new == "training"]
    began = files.status.get("started_at")
    if entered and isinstance(began, str):
        figures["trainer_startup_s"] = parse_utc_iso(began) - parse_utc_iso(entered[0])
    return figures


def training_window(files: RunFiles) -> tuple[float, float] | None:
    """Wall times from LibreYOLO's training start to the end of the last epoch."""
    began, ended = files.status.get("started_at"), files.marker.get("time")
    if not isinstance(began, str) or not isinstance(ended, int | float):
        return None
    return parse_utc_iso(began), float(ended)


def _s(value: Any, unit: str = "s", digits: int = 1) -> str:
    return f"{value:.{digits}f} {unit}" if isinstance(value, int | float) else "?"


def render(fig: dict[str, Any]) -> list[str]:
    """The figures as lines for people; `fig` is what gpu_check.py collects (figures.json)."""
    pre, ep, bud = fig["preflight"], fig["epochs"], fig["budget"]
    idle, gpu = fig["idle"], fig["gpu"]
    cfg = fig.get("train_config") or {}
    lines = [
        f"== gpu-check figures: {fig.get('machine', '?')}",
        f"preflight          {_s(pre.get('wall_s'))} wall, {pre.get('summary', '?')}",
    ]
    if pre.get("profile"):
        lines.append(f"  profiler         {pre['profile']}")
    lines += [
        f"training           {fig.get('model')} from scratch, imgsz {cfg.get('imgsz', '?')}, "
        f"batch {cfg.get('batch', '?')} (asked -1: AutoBatch), amp {cfg.get('amp', '?')}",
        f"  epochs           {ep['epochs']} trained: first {_s(ep['first_epoch_s'])}, then "
        f"{_s(ep['plain_epoch_s'])} plain, {_s(ep['validating_epoch_s'])} validating "
        "(LibreYOLO's epoch time: training + validation, without checkpoint saves)",
        f"  images/s         {_s(ep['images_per_s'], 'img/s', 0)} "
        f"({fig.get('train_images')} training images / median plain epoch after the first)",
        f"GPU memory peak    preflight {_s(gpu.get('preflight_peak_gib'), 'GiB')}, "
        f"run {_s(gpu.get('run_peak_gib'), 'GiB')} of {_s(gpu.get('total_gib'), 'GiB')} "
        f"({gpu.get('how', '?')}); GPU busy {_s(gpu.get('training_util_pct'), '%', 0)} "
        "on average while training",
        f"budget             wall_clock {_s(bud.get('wall_clock_s'))}, "
        f"reserve {_s(bud.get('reserve_s'))} before the deadline; "
        f"ended: {bud['termination']} ({bud['why']})",
        f"  last epoch       planned {bud['planned_last_epoch']}, trained "
        f"{bud['trained_last_epoch']}, would have fit {bud.get('fits_last_epoch', '?')} "
        f"(at the epoch lengths measured), of {bud['total_epochs']}",
        f"  prediction       next epoch {json.dumps(bud['predicted_next_epoch_s'])} s; "
        f"stopped by {bud['stopped_by']}: {bud['stop_detail']}",
        f"  finish margin    {_s(bud.get('finish_margin_s'))} before the deadline",
        f"billed idle        before training {_s(idle['before_training_s'])}, trainer start-up "
        f"{_s(idle.get('trainer_startup_s'))}, after training {_s(idle['after_training_s'])} "
        f"(by status: {json.dumps({k: round(v, 1) for k, v in idle['idle_by_status'].items()})})",
        f"billed             {_s(idle['billed_s'])}"
        + (f", ${idle['usd']:.4f} at ${fig['hourly_cost']}/h" if idle.get("usd") else ""),
        f"gpu-check total    {_s(fig.get('total_s'))}",
    ]
    return lines
