"""What `runspec status` shows about a run, read from its record and run folder only (never
the network, never torch), so it answers at once even while training runs."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from runspec.clock import human_duration, parse_utc_iso
from runspec.state import RunRecord, RunStatus

log = logging.getLogger("runspec.daemon.runinfo")


def run_dir_of(state: Path, name: str, record: RunRecord | None = None) -> Path:
    if record is not None and record.run_dir:
        return Path(record.run_dir)
    try:
        from runspec.loader import load_spec
        from runspec.paths import RunPaths

        spec = load_spec(state / "jobs" / name / "spec.yaml")
        return RunPaths.for_spec(spec, state).run_dir
    except Exception:  # an unreadable spec still leaves the default location
        return state / "runs" / name


def _hourly_cost(state: Path, name: str) -> float | None:
    try:
        from runspec.loader import load_spec

        return load_spec(state / "jobs" / name / "spec.yaml").budget.hourly_cost
    except Exception:
        return None


def _observe(run_dir: Path, control_dir: Path, live: bool) -> dict[str, Any]:
    try:
        from runspec.observer import observe
    except ImportError:
        return {}
    try:
        obs = observe(run_dir, control_dir, alive=live)
    except Exception as exc:
        log.debug("cannot observe %s: %s", run_dir, exc)
        return {}
    return {
        "eta_seconds": getattr(obs, "eta_seconds", None),
        "best_metric": getattr(obs, "best_metric", None),
        "best_metric_name": getattr(obs, "best_metric_name", None),
        "completed_epochs": getattr(obs, "completed_epochs", None),
        "train_loss": getattr(obs, "train_loss", None),
    }


def info(state: Path, record: RunRecord, now: float) -> dict[str, Any]:
    run_dir = run_dir_of(state, record.name, record)
    live = record.status not in (RunStatus.QUEUED, RunStatus.FINISHED)
    obs = _observe(run_dir, state / "jobs" / record.name / "control", live)
    budget_left = None
    if record.deadline and record.status is not RunStatus.FINISHED:
        budget_left = parse_utc_iso(record.deadline) - now
    elapsed = None
    if record.started_at:
        end = parse_utc_iso(record.ended_at) if record.ended_at else now
        elapsed = max(end - parse_utc_iso(record.started_at), 0.0)
    cost = record.cost.get("usd") if record.cost else None
    hourly = _hourly_cost(state, record.name)
    if cost is None and elapsed is not None and hourly is not None:
        cost = elapsed / 3600 * hourly
    push = record.last_push
    return {
        "name": record.name,
        "status": record.status.value,
        "termination": record.termination.value if record.termination else None,
        "reason": record.reason,
        "epoch": record.epoch,
        "total_epochs": record.total_epochs,
        "eta_seconds": obs.get("eta_seconds"),
        "best_metric": obs.get("best_metric"),
        "best_metric_name": obs.get("best_metric_name"),
        "last_push": (
            {"epoch": push.epoch, "time": push.time, "final": push.final, "files": push.files}
            if push
            else None
        ),
        "push_error": record.push_error,
        "budget_left_seconds": budget_left,
        "elapsed_seconds": elapsed,
        "cost_usd": cost,
        "queued_at": record.queued_at,
        "started_at": record.started_at,
        "ended_at": record.ended_at,
        "run_dir": str(run_dir),
        "monitor": f"libreyolo monitor {run_dir} --no-browser",
    }


def _fmt(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def table(rows: list[dict[str, Any]]) -> str:
    header = ("NAME", "STATE", "EPOCH", "ETA", "BEST", "LAST PUSH", "BUDGET LEFT", "COST")
    lines = [header]
    for r in rows:
        state = r["status"] + (f" ({r['termination']})" if r["termination"] else "")
        epoch = f"{r['epoch']}/{r['total_epochs']}" if r["total_epochs"] else "-"
        eta = human_duration(r["eta_seconds"]) if r["eta_seconds"] is not None else "-"
        best = "-"
        if r["best_metric"] is not None:
            best = f"{r['best_metric_name'] or ''} {r['best_metric']:.4f}".strip()
        push = r["last_push"]
        push_text = "-"
        if push:
            push_text = f"epoch {push['epoch']}" + (" final" if push["final"] else "")
        if r["push_error"]:
            push_text += " (failing)"
        left = r["budget_left_seconds"]
        budget = "-" if left is None else (human_duration(left) if left > 0 else "overrun")
        lines.append(
            (r["name"], state, epoch, eta, best, push_text, budget, _fmt(r["cost_usd"], "${:.2f}"))
        )
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    out = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in lines
    ]
    for r in rows:
        if r["status"] != "queued":
            out.append(f"charts for {r['name']}: {r['monitor']}")
    return "\n".join(out)


def dumps(rows: list[dict[str, Any]]) -> str:
    return json.dumps(rows, indent=2)
