"""`runspec status` as text: one table of runs and inbox specs, then a note per thing worth
saying (where the budget cuts a run, a transfer under way, a full disk, a refused spec)."""

from __future__ import annotations

from typing import Any

from runspec.clock import human_duration
from runspec.meter import snapshot_text
from runspec.views.epochline import metric_name

HEADER = ("NAME", "STATE", "AGE", "EPOCH", "ETA", "BEST", "LAST PUSH", "BUDGET LEFT", "COST")
DASHES = ("-",) * (len(HEADER) - 2)


def _push_text(push: dict[str, Any] | None, failing: bool) -> str:
    text = "-"
    if push:
        # A push before the first epoch carries only the run's files.
        text = f"epoch {push['epoch']}" if push["epoch"] is not None else "run files"
        text += " final" if push["final"] else ""
    return text + (" (failing)" if failing else "")


def _run_row(r: dict[str, Any]) -> tuple[str, ...]:
    state = r["status"] + (f" ({r['termination']})" if r["termination"] else "")
    epoch = f"{r['epoch']}/{r['total_epochs']}" if r["total_epochs"] else "-"
    eta = human_duration(r["eta_seconds"]) if r["eta_seconds"] is not None else "-"
    best = "-"
    if r["best_metric"] is not None:
        best = f"{metric_name(r['best_metric_name'] or '')} {r['best_metric']:.4f}"
    left = r["budget_left_seconds"]
    budget = "-" if left is None else (human_duration(left) if left > 0 else "overrun")
    cost = "-" if r["cost_usd"] is None else f"${r['cost_usd']:.2f}"
    push = _push_text(r["last_push"], bool(r["push_error"]))
    age = "-" if r.get("age_seconds") is None else human_duration(r["age_seconds"])
    return (r["name"], state, age, epoch, eta, best, push, budget, cost)


FAILED = ("failed-preflight", "failed-staging", "failed-training", "lost")


def _run_notes(r: dict[str, Any]) -> list[str]:
    name = r["name"]
    notes = []
    if r["termination"] in FAILED:
        notes.append(f"{name}: {r['termination']}: {r['reason']}")
    if r.get("budget_stops_at_epoch") is not None:
        notes.append(
            f"{name}: the budget stops this run at about epoch {r['budget_stops_at_epoch']} "
            f"of {r['total_epochs']}"
        )
    if r.get("schedule"):
        notes.append(f"{name}: {r['schedule']}")
    if r.get("first_step_seconds") is not None:
        took = human_duration(r["first_step_seconds"])
        notes.append(f"{name}: first training step {took} after the spec arrived")
    if r.get("transfer"):
        notes.append(f"{name}: {snapshot_text(r['transfer'])}")
    if r.get("disk_full"):
        full = r["disk_full"]
        notes.append(
            f"{name}: DISK FULL since {full.get('since')}: {full.get('what') or ''} "
            f"({full.get('path')}, needs {full.get('needed')})".replace(":  (", ": (")
        )
    elif r.get("low_space"):
        notes.append(f"{name}: low on disk space: {r['low_space']}")
    if lease := r.get("lease"):
        notes.append(f"{name}: {lease_text(lease)}")
    if r.get("nobody_drives"):
        notes.append(f"{name}: {r['nobody_drives']}")
    if r.get("driven_by"):
        notes.append(f"{name}: driven by {r['driven_by']}")
    return notes


def lease_text(lease: dict[str, Any]) -> str:
    if lease.get("resumed_at") is not None:
        before = lease.get("before") or {}
        return (
            f"lease not yet renewed since the resume at {lease['resumed_at']} (the attempt "
            f"before's: {lease_text(before)})"
        )
    ended = lease.get("ended_by")
    if isinstance(ended, dict):
        done = "" if ended.get("confirmed") else " (not confirmed)"
        return f"{ended.get('action')} by {ended.get('by')}{done}: {ended.get('reason')}"
    if lease.get("state") == "finished":
        verified = "verified" if lease.get("final_verified") else "NOT verified"
        return f"lease closed at {lease.get('renewed_at')} (final push {verified})"
    text = f"lease vouched until {lease.get('vouched_until')} (renewed {lease.get('renewed_at')})"
    timer = lease.get("timer")
    if isinstance(timer, dict):
        text += f"; provider timer: {timer.get('action')} at {timer.get('at')}"
    return text


SHOWN_IGNORED = 5


def ignored_text(names: list[str]) -> str:
    """The inbox's files that are no specs, in one line."""
    shown = ", ".join(names[:SHOWN_IGNORED])
    more = f" (and {len(names) - SHOWN_IGNORED} more)" if len(names) > SHOWN_IGNORED else ""
    return (
        f"inbox: {len(names)} file(s) the daemon ignores, as only .yaml and .yml files are "
        f"specs: {shown}{more}"
    )


def table(rows: list[dict[str, Any]]) -> str:
    lines: list[tuple[str, ...]] = [HEADER]
    notes: list[str] = []
    for r in rows:
        if r["status"] == "damaged":
            lines.append((r["name"], "DAMAGED", *DASHES))
            notes.append(f"{r['name']}: record damaged ({r['reason']}); {r['fix']}")
        elif r["status"] == "waiting":
            lines.append((r["name"], "waiting in the inbox", *DASHES))
        elif r["status"] == "rejected":
            lines.append((r["name"], "rejected", *DASHES))
            more = f" (and {r['problems'] - 1} more)" if r["problems"] > 1 else ""
            notes.append(f"{r['name']}: rejected at {r['time']}: {r['reason']}{more}")
            notes.append(f"{r['name']}: the whole error is in {r['file']}.error; {r['clear']}")
        else:
            lines.append(_run_row(r))
            notes += _run_notes(r)
    widths = [max(len(row[i]) for row in lines) for i in range(len(HEADER))]
    out = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in lines
    ]
    out += notes
    for r in rows:
        if r["status"] not in ("queued", "damaged", "waiting", "rejected", "finished"):
            out.append(f"charts for {r['name']}: {r['monitor']}")
    return "\n".join(out)
