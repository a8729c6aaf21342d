"""A damaged record under a live trainer: the run's record rebuilt from its job folder.

A record.json something else damaged says nothing of its run; but while that run's trainer is
alive, the rest of the job folder still says what the daemon needs to drive it to its end: the
spec (spec.yaml), where its files are (paths.json), the trainer's identity (trainer.json), the
deadline and the newest epoch (control/), the data it trains on (train_job.json) and the last
verified push (pushed.json). The rebuilt record is marked `rebuilt`, and the damaged file is
kept beside it (never deleted). A rebuilt run is never trusted for a destroy: its history came
from files the same damage may have touched, so the machine's end keeps the disk (a stop) until
a person has looked (`runspec rm`).
"""

from __future__ import annotations

from runspec.clock import Clock, utc_iso
from runspec.errors import RunspecError
from runspec.push.manifest import Manifest
from runspec.spec.loader import load_accepted
from runspec.spec.rules import RULES_VERSION
from runspec.store.owner import run_holder
from runspec.store.paths import RunPaths, StateLayout
from runspec.store.state import (
    Damaged,
    PushRecord,
    Rebuilt,
    RecordStore,
    Reopen,
    RunRecord,
    RunStatus,
    move,
)
from runspec.trainer import control
from runspec.trainer.control import TrainJob
from runspec.trainer.launcher import TrainerHandle


class CannotRebuild(RunspecError):
    pass


def live_trainer(paths: RunPaths, clock: Clock) -> TrainerHandle | None:
    handle = TrainerHandle.find(paths, clock)
    return handle if handle is not None and handle.alive() else None


def rebuilt_record(paths: RunPaths, clock: Clock, damaged: Damaged) -> RunRecord:
    """The record of a training run, from its job folder's other files (CannotRebuild when
    one of them that it needs cannot be read)."""
    try:
        spec = load_accepted(paths.spec_file)
        job = TrainJob.read(paths.train_job_file)
    except (RunspecError, OSError, ValueError, KeyError, TypeError) as exc:
        raise CannotRebuild(f"its spec or its train job is unreadable: {exc}") from exc
    # The run's own deadline; a folder an older runspec wrote has only the trainer's stop time
    # (the deadline less the reserve): the earlier end, never a later one.
    deadline = control.read_deadline(paths.control_dir, "run_deadline")
    deadline = deadline or control.read_deadline(paths.control_dir)
    if deadline is None:
        raise CannotRebuild("its deadline (control/deadline) is unreadable")
    marker = control.read_epoch_marker(paths.control_dir)
    start = utc_iso(deadline - spec.budget.wall_clock)
    now = utc_iso(clock.time())
    record = RunRecord(
        name=spec.name,
        spec_sha256=spec.sha256,
        started_at=start,
        budget_started_at=start,
        deadline=utc_iso(deadline),
        data_yaml=job.data,
        epoch=marker.epoch if marker is not None else 0,
        total_epochs=job.epochs,
        spec_rules=RULES_VERSION,
        rebuilt=Rebuilt(damaged.reason, damaged.kept_as, now),
    )
    manifest = Manifest.load(paths.pushed_manifest)
    if manifest is not None:
        files = [entry.path for entry in manifest.entries]
        size = sum(entry.size for entry in manifest.entries)
        record.last_push = PushRecord(
            manifest.epoch, manifest.time, None, files, size, final=manifest.final
        )
    why = f"rebuilt from its job folder ({damaged.reason})"
    move(record, RunStatus.TRAINING, why, clock.time(), via=Reopen.REBUILD)
    return record


def rebuild(store: RecordStore, layout: StateLayout, bad: Damaged) -> RunRecord | None:
    """Rebuild the damaged run `bad` when its trainer is alive and nothing else drives it:
    the damaged file set aside first (kept), then the rebuilt record saved. None: left as is."""
    paths = layout.run_paths(bad.name)
    if run_holder(paths) is not None or live_trainer(paths, store.clock) is None:
        return None
    kept = bad if bad.kept_as else store.set_aside(bad.name, bad.reason)
    record = rebuilt_record(paths, store.clock, kept)
    store.save(record)
    return record
