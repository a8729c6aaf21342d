"""`runspec status --hub ORG`: one row per run repo, from its record and lease as read at
its head commit (runspec.push.fleetread reads them), and the lines people see."""

from __future__ import annotations

from typing import Any

from runspec.clock import human_duration, parse_utc_iso
from runspec.printable import printable

TAG = "runspec"


def row(repo: str, sha: str, data: dict[str, Any], now: float, hit: bool) -> dict[str, Any]:
    record = data.get("record") or {}
    lease = data.get("lease") or {}
    state = record.get("termination") or record.get("status") or "no record"
    if record.get("terminal"):
        state = f"{state} (terminal)"
    ended = lease.get("ended_by") if isinstance(lease.get("ended_by"), dict) else None
    # The push of this very commit (its record rides in it), else the one before it.
    pushes = [record.get(k) for k in ("push", "last_push") if isinstance(record.get(k), dict)]
    push = pushes[0] if pushes else None
    left = None
    if record.get("deadline") and record.get("status") != "finished":
        try:
            left = parse_utc_iso(str(record["deadline"])) - now
        except ValueError:
            left = None
    cost = (record.get("cost") or {}).get("usd") if isinstance(record.get("cost"), dict) else None
    return {
        "repo": repo,
        "commit": sha,
        "name": record.get("name"),
        "state": state,
        "epoch": record.get("epoch"),
        "total_epochs": record.get("total_epochs"),
        "last_push": push,
        "budget_left_s": None if left is None else round(left, 1),
        "cost_usd": cost if isinstance(cost, int | float) else None,
        "stopped_by_watch": None if ended is None else str(ended.get("reason", "")),
        "vouched_until": lease.get("vouched_until"),
        "cached": hit,
    }


def lines(org: str, rows: list[dict[str, Any]]) -> list[str]:
    """The table for people."""
    if not rows:
        return [f"no runs of {printable(org)} on the Hub (no model repo tagged {TAG!r})"]
    out = [f"{len(rows)} runs of {printable(org)} on the Hub"]
    for row in rows:
        epoch = f"epoch {row['epoch']}/{row['total_epochs']}" if row["epoch"] is not None else ""
        push = row["last_push"]
        pushed = f"pushed epoch {push.get('epoch')} at {push.get('time')}" if push else "no push"
        left = row["budget_left_s"]
        budget = f"budget left {human_duration(max(left, 0.0))}" if left is not None else ""
        cost = f"${row['cost_usd']:.2f}" if row["cost_usd"] is not None else ""
        watch = f"stopped by watch: {row['stopped_by_watch']}" if row["stopped_by_watch"] else ""
        parts = [row["repo"], row["state"], epoch, pushed, budget, cost, watch]
        out.append(printable("  ".join(p for p in parts if p)))
    return out
