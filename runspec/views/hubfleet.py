"""`runspec status --hub ORG`: one row per run repo, from its record, lease, receipt and end's
confirmation as read at its head commit (runspec.push.fleetread reads them), the lines people
see and the object `--json` prints."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from runspec.clock import human_duration, parse_utc_iso
from runspec.printable import printable

TAG = "runspec"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and len(value) <= 256 else None


_FIELDS: dict[str, Callable[[Any], Any]] = {
    "name": _text,
    "status": _text,
    "termination": _text,
    "deadline": _text,
    "epoch": _int,
    "total_epochs": _int,
}


def _typed(record: Any) -> dict[str, Any] | None:
    """The record's fields this view shows, each of the type runspec writes; None when one is
    there with another type (a record runspec did not write)."""
    if not isinstance(record, dict):
        return None
    out: dict[str, Any] = {}
    for key, read in _FIELDS.items():
        if record.get(key) is not None and (out.setdefault(key, read(record[key])) is None):
            return None
    out["terminal"] = record.get("terminal") is True
    pushes = [p for k in ("push", "last_push") if isinstance(p := record.get(k), dict)]
    if pushes:  # the push of this very commit (its record rides in it), else the one before
        push: dict[str, Any] = pushes[0]
        epoch, time = push.get("epoch"), push.get("time")
        if (epoch is not None and _int(epoch) is None) or (time is not None and not _text(time)):
            return None
        out["push"] = {"epoch": epoch, "time": time, "final": push.get("final") is True}
    cost = record.get("cost")
    usd = cost.get("usd") if isinstance(cost, dict) else None
    ok = isinstance(usd, int | float) and not isinstance(usd, bool) and math.isfinite(usd)
    out["cost_usd"] = usd if ok else None
    return out


_SHA = re.compile(r"[0-9a-f]{40}")


def _source(provenance: Any) -> dict[str, str] | None:
    """The spec's git commit and path, as the pushed provenance names them (each checked)."""
    git = provenance.get("git") if isinstance(provenance, dict) else None
    if not isinstance(git, dict):
        return None
    commit, path = git.get("commit"), _text(git.get("path"))
    if not isinstance(commit, str) or not _SHA.fullmatch(commit) or path is None:
        return None
    return {"commit": commit, "path": path}


def _billed(receipt: Any) -> float | None:
    """What the receipt says the run was billed, in USD."""
    billed = receipt.get("billed") if isinstance(receipt, dict) else None
    usd = billed.get("usd") if isinstance(billed, dict) else None
    if not isinstance(usd, int | float) or isinstance(usd, bool):
        return None
    return float(usd) if math.isfinite(usd) and usd >= 0 else None


ENDS = frozenset({"stop", "destroy"})  # what an end's confirmation confirms (push.endconfirm)


def _end(doc: Any) -> dict[str, str | None] | None:
    """The end's confirmation (`runspec/end.json`) as runspec.push.endconfirm writes it: who
    saw which end, when, of which instance; None for anything else."""
    if not isinstance(doc, dict) or doc.get("confirmed") is not True:
        return None
    action, by, at = doc.get("action"), doc.get("by"), _text(doc.get("at"))
    if action not in ENDS or by not in ("box", "watch") or at is None:
        return None
    out = {"action": action, "by": by, "at": at}
    return out | {key: _text(doc.get(key)) for key in ("provider", "instance", "state")}


def row(repo: str, sha: str, data: dict[str, Any], now: float, hit: bool) -> dict[str, Any]:
    raw = data.get("record")
    record = _typed(raw) if raw is not None else {}
    lease = data.get("lease") if isinstance(data.get("lease"), dict) else {}
    assert isinstance(lease, dict)
    if record is None or (data.get("unreadable") or {}).get("record"):
        record, state = {}, "unreadable record"
    else:
        state = record.get("termination") or record.get("status") or "no record"
    if record.get("terminal"):
        state = f"{state} (terminal)"
    ended = lease.get("ended_by") if isinstance(lease.get("ended_by"), dict) else None
    # The final push is made while the run is `pushing`: the record it carries has its
    # termination, and its deadline no longer counts down anything.
    push = record.get("push") or {}
    over = bool(record.get("termination")) or record.get("status") == "finished"
    over = over or push.get("final") is True
    left = None
    if record.get("deadline") and not over:
        try:
            left = parse_utc_iso(str(record["deadline"])) - now
        except (ValueError, OverflowError):
            left = None
    vouched = lease.get("vouched_until")
    return {
        "repo": repo,
        "commit": sha,
        "name": record.get("name"),
        "state": state,
        "under_way": bool(record) and not over,
        "epoch": record.get("epoch"),
        "total_epochs": record.get("total_epochs"),
        "last_push": record.get("push"),
        "budget_left_s": None if left is None else round(left, 1),
        "cost_usd": record.get("cost_usd"),
        "source": _source(data.get("provenance")),
        "billed_usd": _billed(data.get("receipt")),
        "stopped_by_watch": None if ended is None else str(ended.get("reason", ""))[:256],
        "end": _end(data.get("end")),
        "vouched_until": _text(vouched),
        "cached": hit,
    }


def _none(org: str) -> str:
    return f"no runs of {printable(org)} on the Hub (no model repo tagged {TAG!r})"


def fleet_json(org: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """`status --hub ORG --json`: one object, as `status --json` is; `reason` says why the
    list is empty (None when it is not)."""
    going = sum(1 for row in rows if row.get("under_way"))
    reason = None if rows else _none(org)
    return {"org": org, "count": len(rows), "under_way": going, "runs": rows, "reason": reason}


def lines(org: str, rows: list[dict[str, Any]]) -> list[str]:
    """The table for people."""
    if not rows:
        return [_none(org)]
    going = sum(1 for row in rows if row.get("under_way"))
    out = [f"{len(rows)} runs of {printable(org)} on the Hub: {going} under way"]
    for row in rows:
        epoch = f"epoch {row['epoch']}/{row['total_epochs']}" if row["epoch"] is not None else ""
        push = row["last_push"]
        pushed = f"pushed epoch {push.get('epoch')} at {push.get('time')}" if push else "no push"
        left = row["budget_left_s"]
        budget = f"budget left {human_duration(max(left, 0.0))}" if left is not None else ""
        usd = row["billed_usd"] if row.get("billed_usd") is not None else row["cost_usd"]
        cost = f"${usd:.2f}" if usd is not None else ""
        came = row.get("source")
        source = f"from {came['path']}@{came['commit'][:12]}" if came else ""
        watch = f"stopped by watch: {row['stopped_by_watch']}" if row["stopped_by_watch"] else ""
        parts = [row["repo"], row["state"], epoch, pushed, budget, cost, source, watch]
        if (end := row.get("end")) is not None:
            parts.append(f"{end['action']} confirmed by the {end['by']} at {end['at']}")
        out.append(printable("  ".join(p for p in parts if p)))
    return out
