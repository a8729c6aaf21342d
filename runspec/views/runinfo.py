"""What `runspec status` shows about a run, read from its record and run folder only (never
the network, never torch), so it answers at once even while training runs."""

from __future__ import annotations

import json
import logging
import shlex
import shutil
from pathlib import Path
from typing import Any

from runspec.budget import eval_interval_of, last_epoch_in_budget
from runspec.clock import parse_utc_iso
from runspec.cost import settled_cost
from runspec.errors import RunspecError
from runspec.meter import read_snapshot
from runspec.spec.loader import load_accepted
from runspec.spec.model import Spec
from runspec.store.hint import command
from runspec.store.owner import daemon_holder, run_holder
from runspec.store.paths import RunPaths, StateLayout
from runspec.store.room import read_note
from runspec.store.state import Damaged, RunRecord, RunStatus
from runspec.trainer import control
from runspec.trainer.firststep import time_to_first_step
from runspec.trainer.observer import observe

log = logging.getLogger("runspec.views.runinfo")

LOW_SPACE = 100_000_000  # bytes: below this free on a run's disks, status says so


def _spec(paths: RunPaths) -> Spec | None:
    try:
        return load_accepted(paths.spec_file)
    except RunspecError:
        return None


def budget_stops_at(paths: RunPaths, spec: Spec | None) -> int | None:
    """The epoch the budget will stop training after, when that is before the last one: from
    the planner's own figures (the control folder's stop time and next-epoch predictions) and
    the last epoch's end."""
    marker = control.read_epoch_marker(paths.control_dir)
    stop_at = control.read_deadline(paths.control_dir)
    if spec is None or marker is None or stop_at is None:
        return None
    guesses = {kind: control.read_next_epoch(paths.control_dir, kind) for kind in (True, False)}

    def predict(validating: bool) -> float:
        return guesses[validating] or marker.epoch_seconds

    last = last_epoch_in_budget(
        stop_at, marker.time, marker.epoch, marker.total_epochs, eval_interval_of(spec), predict
    )
    return last if last is not None and last < marker.total_epochs else None


def _observe(run_dir: Path, control_dir: Path) -> dict[str, Any]:
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


def _lease(paths: RunPaths, record: RunRecord) -> dict[str, Any] | None:
    """What the box last wrote to its Hub lease (or read there: who ended it). A copy written
    before the run's latest resume is the attempt before's (closed, or ended by a watcher):
    it is said as such, never as this attempt's lease."""
    try:
        data = json.loads(paths.lease_file.read_text()[:65536])
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    keep = ("vouched_until", "renewed_at", "state", "final_verified", "timer", "ended_by")
    lease = {k: data.get(k) for k in keep}
    resumed = resumed_at(record)
    renewed = lease.get("renewed_at")
    if resumed is not None and (not isinstance(renewed, str) or _before(renewed, resumed)):
        return {"resumed_at": resumed, "before": lease}
    return lease


def resumed_at(record: RunRecord) -> str | None:
    """When the run was last resumed: its last step out of `finished` (UTC); None if never."""
    steps = [h.time for h in record.history if h.old == RunStatus.FINISHED.value]
    return steps[-1] if steps else None


def _before(when: str, than: str) -> bool:
    try:
        return parse_utc_iso(when) < parse_utc_iso(than)
    except (ValueError, OverflowError):
        return True  # a time that cannot be read is no proof of a renewal since


def info(state: Path, record: RunRecord, now: float) -> dict[str, Any]:
    paths = StateLayout(state).run_paths(record.name)
    run_dir = paths.run_dir
    live = record.status not in (RunStatus.QUEUED, RunStatus.FINISHED)
    # A finished run's results still say its best metric (what `status -a` lists); no ETA.
    obs = _observe(run_dir, paths.control_dir) if record.status is not RunStatus.QUEUED else {}
    if not live:
        obs.pop("eta_seconds", None)
    spec = _spec(paths)
    budget_left = None
    if record.deadline and record.status is not RunStatus.FINISHED:
        budget_left = parse_utc_iso(record.deadline) - now
    elapsed = None
    if record.started_at:
        end = parse_utc_iso(record.ended_at) if record.ended_at else now
        elapsed = max(end - parse_utc_iso(record.started_at), 0.0)
    cost = None
    if record.started_at:  # the figure kept at the final push, the card's and the summary's
        cost = settled_cost(record, spec.budget.hourly_cost if spec else None, now).usd
    push = record.last_push
    owner = run_holder(paths) if live else None
    orphan = nobody_drives(paths, state) if live and owner is None else None
    if orphan is not None:
        # Nothing trains, nothing bills for it here: no ETA, and the cost it came to.
        obs.pop("eta_seconds", None)
        cost = record.cost.usd if record.cost else None
    return {
        "name": record.name,
        "status": record.status.value,
        "termination": record.termination.value if record.termination else None,
        # One reason: why it ended, once it has; else why it is where it is now.
        "reason": record.why if record.termination and record.why else record.reason,
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
        "disk_full": read_note(paths.disk_note)
        or (record.disk_full.to_json() if record.disk_full else None),
        "low_space": _low_space(paths) if live else None,
        "driven_by": str(owner) if owner is not None else None,
        "nobody_drives": orphan,
        "budget_left_seconds": budget_left,
        "budget_stops_at_epoch": (
            budget_stops_at(paths, spec) if record.status is RunStatus.TRAINING else None
        ),
        "transfer": read_snapshot(paths.transfer_file) if live else None,
        "lease": _lease(paths, record),
        "elapsed_seconds": elapsed,
        "first_step_seconds": time_to_first_step(record, paths.control_dir),
        # Only a fitted schedule is news: otherwise train.epochs stands.
        "schedule": fit.line() if (fit := record.fit) and fit.fitted else None,
        "cost_usd": cost,
        "queued_at": record.queued_at,
        "age_seconds": age_seconds(record, now),
        "started_at": record.started_at,
        "ended_at": record.ended_at,
        "run_dir": str(run_dir),
        "monitor": f"libreyolo monitor {run_dir} --no-browser",
    }


def age_seconds(record: RunRecord, now: float) -> float | None:
    """How long ago the run arrived (queued, else first started); None when neither is known."""
    since = record.queued_at or record.started_at
    return max(now - parse_utc_iso(since), 0.0) if since else None


def nobody_drives(paths: RunPaths, state: Path) -> str | None:
    """What to do about an unfinished run that no process drives (its driver was killed),
    or None when the daemon holds the state folder (it takes such a run up itself)."""

    if daemon_holder(StateLayout(state)) is not None:
        return None
    try:
        source = json.loads(paths.provenance_file.read_text()).get("source_path")
    except (OSError, ValueError, AttributeError):
        source = None
    spec = shlex.quote(str(source or paths.spec_file))
    return f"nobody drives this run: {command(f'run {spec} --resume', state)} or start runspecd"


def damaged_info(damaged: Damaged, state: Path) -> dict[str, Any]:
    return {
        "name": damaged.name,
        "status": "damaged",
        "termination": None,
        "reason": damaged.reason,
        "kept_as": damaged.kept_as,
        "fix": f"look at the kept record, then `{command(f'rm {damaged.name}', state)}`",
    }
