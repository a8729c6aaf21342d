"""What `runspec status` shows about a run, read from its record and run folder only (never
the network, never torch), so it answers at once even while training runs."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from runspec.clock import human_duration, parse_utc_iso
from runspec.cost import run_cost
from runspec.errors import RunspecError
from runspec.owner import read_note, run_holder
from runspec.paths import RunPaths, StateLayout
from runspec.state import Damaged, RunRecord, RunStatus

log = logging.getLogger("runspec.views.runinfo")

LOW_SPACE = 100_000_000  # bytes: below this free on a run's disks, status says so


def run_dir_of(state: Path, name: str, record: RunRecord | None = None) -> Path:
    if record is not None and record.run_dir:
        return Path(record.run_dir)
    return StateLayout(state).run_paths(name).run_dir


def _hourly_cost(paths: RunPaths) -> float | None:
    from runspec.loader import load_spec

    try:
        return load_spec(paths.spec_file).budget.hourly_cost
    except (RunspecError, OSError):
        return None


def _observe(run_dir: Path, control_dir: Path) -> dict[str, Any]:
    from runspec.observer import observe

    try:
        obs = observe(run_dir, control_dir)
    except Exception as exc:
        log.debug("cannot observe %s: %s", run_dir, exc)
        return {}
    return {
        "eta_seconds": obs.eta_seconds,
        "best_metric": obs.best_metric,
        "best_metric_name": obs.best_metric_name,
        "completed_epochs": obs.completed_epochs,
        "train_loss": obs.train_loss,
    }


def _low_space(paths: RunPaths) -> str | None:
    for where in (paths.state, paths.project):
        probe = where
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        try:
            free = shutil.disk_usage(probe).free
        except OSError:
            continue
        if free < LOW_SPACE:
            return f"{probe} has {free / 1e6:.0f} MB free"
    return None


def info(state: Path, record: RunRecord, now: float) -> dict[str, Any]:
    paths = StateLayout(state).run_paths(record.name)
    run_dir = run_dir_of(state, record.name, record)
    live = record.status not in (RunStatus.QUEUED, RunStatus.FINISHED)
    obs = _observe(run_dir, paths.control_dir) if live else {}
    budget_left = None
    if record.deadline and record.status is not RunStatus.FINISHED:
        budget_left = parse_utc_iso(record.deadline) - now
    elapsed = None
    if record.started_at:
        end = parse_utc_iso(record.ended_at) if record.ended_at else now
        elapsed = max(end - parse_utc_iso(record.started_at), 0.0)
    cost = record.cost.get("usd") if record.cost else None
    if cost is None and record.started_at:
        cost = run_cost(record, _hourly_cost(paths), now).usd
    push = record.last_push
    owner = run_holder(paths) if live else None
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
        # The note when the disk is too full for the record itself to be saved.
        "disk_full": read_note(paths.disk_note) or record.disk_full,
        "low_space": _low_space(paths) if live else None,
        "driven_by": str(owner) if owner is not None else None,
        "budget_left_seconds": budget_left,
        "elapsed_seconds": elapsed,
        "cost_usd": cost,
        "queued_at": record.queued_at,
        "started_at": record.started_at,
        "ended_at": record.ended_at,
        "run_dir": str(run_dir),
        "monitor": f"libreyolo monitor {run_dir} --no-browser",
    }


def damaged_info(damaged: Damaged) -> dict[str, Any]:
    return {
        "name": damaged.name,
        "status": "damaged",
        "termination": None,
        "reason": damaged.reason,
        "kept_as": damaged.kept_as,
        "fix": f"look at the kept record, then `runspec rm {damaged.name}`",
    }


def _fmt(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def table(rows: list[dict[str, Any]]) -> str:
    header = ("NAME", "STATE", "EPOCH", "ETA", "BEST", "LAST PUSH", "BUDGET LEFT", "COST")
    lines = [header]
    notes: list[str] = []
    for r in rows:
        if r["status"] == "damaged":
            lines.append((r["name"], "DAMAGED", "-", "-", "-", "-", "-", "-"))
            notes.append(f"{r['name']}: record damaged ({r['reason']}); {r['fix']}")
            continue
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
        if r.get("disk_full"):
            full = r["disk_full"]
            notes.append(
                f"{r['name']}: DISK FULL since {full.get('since')}: {full.get('what') or ''} "
                f"({full.get('path')}, needs {full.get('needed')})".replace(":  (", ": (")
            )
        elif r.get("low_space"):
            notes.append(f"{r['name']}: low on disk space: {r['low_space']}")
        if r.get("driven_by"):
            notes.append(f"{r['name']}: driven by {r['driven_by']}")
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    out = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in lines
    ]
    out += notes
    for r in rows:
        if r["status"] not in ("queued", "damaged"):
            out.append(f"charts for {r['name']}: {r['monitor']}")
    return "\n".join(out)


def dumps(rows: list[dict[str, Any]]) -> str:
    return json.dumps(rows, indent=2)
