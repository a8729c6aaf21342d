"""The closing summary a person reads when a run ends: the daemon's and `runspec run`'s last
lines about it."""

from __future__ import annotations

import json
import re

from runspec.clock import SYSTEM, Clock, human_duration
from runspec.cost import settled_cost, usd_text
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths
from runspec.store.state import RunRecord, Termination
from runspec.trainer.firststep import time_to_first_step
from runspec.trainer.observer import read_epochs
from runspec.units import format_bytes, plain_int
from runspec.views.epochline import metric_name
from runspec.voice import ERROR, Said

FAILED = frozenset(
    {
        Termination.FAILED_PREFLIGHT,
        Termination.FAILED_STAGING,
        Termination.FAILED_TRAINING,
        Termination.LOST,
    }
)


def push_target(spec: Spec, paths: RunPaths) -> str:
    """Where the run pushes, as its pushes said it (a relative dir is under the state)."""
    push = spec.push
    if push is None:
        return "nowhere"
    if push.hub is not None:
        return f"hub {push.hub.repo}"
    assert push.dir is not None
    return f"dir {paths.resolve(push.dir) / spec.name}"


def natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that orders numbers as numbers: epoch_2.pt before epoch_10.pt."""
    parts = re.split(r"([0-9]+)", name)
    return tuple((1, p) if (n := plain_int(p)) is None else (0, n) for p in parts if p)


def summary_weights(files: list[str]) -> str:
    names = sorted(
        (f.removeprefix("weights/") for f in files if f.startswith("weights/")), key=natural
    )
    return f" ({', '.join(names)})" if names else ""


def best_line(paths: RunPaths) -> str | None:
    rows = read_epochs(paths.run_dir)
    best = rows[-1].get("best_metric") if rows else None
    if not isinstance(best, int | float):
        return None
    name = metric_name(str(rows[-1].get("best_metric_name") or ""))
    at = rows[-1].get("best_epoch")
    where = f" (epoch {at})" if isinstance(at, int) else ""
    return f"best: {name} {best:.4g}{where}"


def held_bytes(paths: RunPaths, fallback: int) -> int:
    """The bytes of the files the verified push holds (its manifest's: the weights' and the
    run's files), not those of its last commit alone; `fallback` when it cannot be read."""
    try:
        files = json.loads(paths.pushed_manifest.read_text()).get("files")
        return sum(int(entry["size"]) for entry in files)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return fallback


def summary_lines(
    spec: Spec, paths: RunPaths, record: RunRecord, clock: Clock = SYSTEM
) -> list[str]:
    term = record.termination.value if record.termination else record.status.value
    why = f": {record.why}" if record.why else ""
    first = f"summary: {term} at epoch {record.epoch}/{record.total_epochs}{why}"
    lines: list[str] = [Said(first, ERROR) if record.termination in FAILED else first]
    if (best := best_line(paths)) is not None:
        lines.append(f"  {best}")
    push = record.last_push
    if spec.push is None:
        lines.append("  pushed: nothing (the spec has no push section)")
    elif push is None and record.epoch < 1:
        lines.append(Said("  pushed: nothing: no epoch ended, so there are no weights", ERROR))
    elif push is None:
        lost = "  pushed: NOTHING VERIFIED: the weights exist only on this machine"
        lines.append(Said(lost, ERROR))
    else:
        final = "final push" if push.final else "last push (NOT the final one)"
        lines.append(
            f"  verified {final}: epoch {push.epoch}, {len(push.files)} files"
            f"{summary_weights(push.files)}, {format_bytes(held_bytes(paths, push.bytes))} to "
            f"{push_target(spec, paths)}"
        )
    hourly = spec.budget.hourly_cost
    cost = settled_cost(record, hourly, clock.time())
    usd = "" if cost.usd is None or hourly is None else f", {usd_text(cost.usd, hourly)}"
    took = time_to_first_step(record, paths.control_dir)
    to_step = "" if took is None else f"; first training step {human_duration(took)} after arrival"
    lines.append(
        f"  time: {human_duration(cost.billed_s)} billed{usd}; GPU idle "
        f"{human_duration(cost.gpu_idle_s)} (preflight, staging, final push, finish){to_step}"
    )
    fit = record.fit
    if fit is not None and fit.fitted:
        lines.append(f"  schedule: {fit.line()} (budget.fit)")
    finish = record.finish
    if finish is not None:
        lines.append(f"  finish: {finish.summary or finish.why or finish.step.value}")
    return lines
