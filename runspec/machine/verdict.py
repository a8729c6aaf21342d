"""What the disk says now: whether a run's weights are off this machine, whether the machine may
end, and the exit status `runspec run` reports.

Every judgement reads the run folder at the moment it is asked, never a saved "verified" flag:
each file the spec's push names (a checkpoint only when it is a whole archive) and the newest
whole checkpoint in `weights/` must equal, byte for byte, the copy the last verified push put
at the target (`pushed.json`). A staged copy that failed, or an older one, never counts.

Whether a file still equals its verified copy is known from the staging index when its size
and mtime (nanoseconds) are those it was staged with, and is hashed again otherwise: a rewrite
moves the mtime, so a stale copy is never taken for the newest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from runspec.errors import Outcome, RunspecError
from runspec.push.manifest import Manifest, digest_file
from runspec.spec.loader import load_accepted
from runspec.spec.model import DEFAULT_PUSH_FILES, Spec
from runspec.store.hint import command
from runspec.store.owner import run_holder
from runspec.store.paths import RunPaths, StateLayout
from runspec.store.state import RecordStore, RunRecord, RunStatus, Termination
from runspec.store.tombstone import unsafe_retired
from runspec.trainer.checkpoints import is_intact_cached
from runspec.trainer.launcher import TrainerHandle

SUCCESSFUL = frozenset({Termination.COMPLETED, Termination.BUDGET})
INDEX = ".index.json"  # the staging index (runspec.push.collect), read here without importing it


@dataclass(frozen=True)
class Safety:
    safe: bool
    why: str


def _is_checkpoint(rel: str) -> bool:
    return rel.startswith("weights/") and rel.endswith(".pt")


def demanded(run_dir: Path, globs: tuple[str, ...]) -> tuple[list[str], str | None]:
    """The run-relative files the target must hold: every file the globs match (checkpoints
    only when whole), and the newest whole checkpoint (None when it is not among them)."""
    found: set[str] = set()
    for pattern in globs:
        for path in run_dir.glob(pattern):
            rel = path.relative_to(run_dir).as_posix()
            if path.is_file() and (not _is_checkpoint(rel) or is_intact_cached(path)):
                found.add(rel)
    newest: tuple[int, str] | None = None
    weights = run_dir / "weights"
    for path in sorted(weights.glob("*.pt")) if weights.is_dir() else []:
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            continue
        if (newest is None or mtime > newest[0]) and is_intact_cached(path):
            newest = (mtime, f"weights/{path.name}")
    missing = newest[1] if newest is not None and newest[1] not in found else None
    return sorted(found), missing


def _staged_sources(paths: RunPaths) -> dict[str, tuple[int, int, str]]:
    """From the staging index: run-relative path -> (size, mtime_ns, sha256) it was staged at."""
    try:
        data = json.loads((paths.staged_dir / INDEX).read_text())
    except (OSError, ValueError):
        return {}
    known: dict[str, tuple[int, int, str]] = {}
    for rel, item in data.items() if isinstance(data, dict) else []:
        try:
            source = item["source"]
            known[rel] = (
                int(source["size"]),
                int(source["mtime_ns"]),
                str(item["entry"]["sha256"]),
            )
        except (KeyError, TypeError, ValueError):
            continue
    return known


def _sha256_now(path: Path, rel: str, staged: dict[str, tuple[int, int, str]]) -> str | None:
    try:
        st = path.stat()
    except OSError:
        return None
    known = staged.get(rel)
    if known is not None and known[:2] == (st.st_size, st.st_mtime_ns):
        return known[2]
    try:
        return digest_file(path).sha256
    except OSError:
        return None


def run_safety(paths: RunPaths, spec: Spec, record: RunRecord) -> Safety:
    """Whether everything of this run that must leave the machine is verified at its target."""
    if record.status is RunStatus.QUEUED:
        return Safety(True, f"run {record.name} never started")
    return files_safety(paths, spec)


def files_safety(paths: RunPaths, spec: Spec) -> Safety:
    """run_safety judged from the files alone (a damaged record says nothing of its status)."""
    name = spec.name
    globs = spec.push.files if spec.push is not None else DEFAULT_PUSH_FILES
    files, newest_missing = demanded(paths.run_dir, globs)
    checkpoints = [rel for rel in files if _is_checkpoint(rel)]
    if spec.push is None:
        if checkpoints or newest_missing:
            return Safety(False, f"run {name} pushes nowhere: its weights are only on this disk")
        return Safety(True, f"run {name} wrote no weights")
    if newest_missing is not None:
        return Safety(
            False,
            f"run {name}'s newest checkpoint {newest_missing} is not among push.files",
        )
    manifest = Manifest.load(paths.pushed_manifest)
    verified = manifest.by_path() if manifest is not None else {}
    staged = _staged_sources(paths)
    for rel in files:
        entry = verified.get(rel)
        if entry is None:
            return Safety(False, f"run {name}: {rel} was never verified at its target")
        if _sha256_now(paths.run_dir / rel, rel, staged) != entry.sha256:
            return Safety(
                False,
                f"run {name}: {rel} on this disk is not the copy verified at its "
                f"target (that one is from epoch {entry.epoch})",
            )
    if not files:
        return Safety(True, f"run {name} wrote nothing to push")
    return Safety(True, f"run {name}: all {len(files)} files verified at the target")


Verdict = Literal["safe", "unsafe", "wait", "blocked"]


@dataclass(frozen=True)
class MachineVerdict:
    verdict: Verdict
    why: str

    @property
    def safe(self) -> bool:
        return self.verdict == "safe"


def _load_spec(paths: RunPaths) -> Spec:
    return load_accepted(paths.spec_file)


def _still_driven(paths: RunPaths) -> bool:
    """Someone holds the run's lock, or its trainer is alive (read only, nothing rewritten)."""
    if run_holder(paths) is not None:
        return True
    handle = TrainerHandle.load(paths)
    return handle is not None and handle.alive()


def machine_verdict(
    layout: StateLayout, *, finishing: str | None = None, daemon_alive: bool = False
) -> MachineVerdict:
    """Whether this machine may end now, judging every run in the state folder.

    wait: a run is still being driven (or queued, with a daemon to run it; or damaged with its
    trainer alive), so the end must wait for it; unsafe: some run's newest weights are not
    verified elsewhere, or a run is damaged (a stop, never a destroy); safe: every run's are.
    `finishing` is the run asking, judged by its files though it is not finished yet.
    """
    scan = RecordStore(layout.state).scan()
    unsafe: list[str] = []
    for bad in scan.damaged:
        # Its status is unknown, so its weights cannot be judged: never a destroy; but a stop
        # (the disk kept) may still end the machine's billing once nothing drives it.
        if bad.name != finishing and _still_driven(layout.run_paths(bad.name)):
            return MachineVerdict("wait", f"run {bad.name} is damaged and still being driven")
        unsafe.append(
            f"run {bad.name} is damaged ({bad.reason}): its weights cannot be judged, so the "
            f"machine is not destroyed (its record kept in {layout.job_dir(bad.name)}; look at "
            f"it, then `{command(f'rm {bad.name}', layout.state)}`)"
        )
    for record in scan.records:
        paths = layout.run_paths(record.name)
        mine = record.name == finishing
        if record.status is RunStatus.QUEUED and not mine:
            if daemon_alive:
                return MachineVerdict("wait", f"run {record.name} is queued")
            continue  # no daemon to run it: it never trained, nothing of it is on the disk
        if record.status is not RunStatus.FINISHED and not mine:
            owner = run_holder(paths)
            if owner is not None or daemon_alive:
                who = f" ({owner})" if owner is not None else ""
                return MachineVerdict("wait", f"run {record.name} is {record.status.value}{who}")
        try:
            safety = run_safety(paths, _load_spec(paths), record)
        except RunspecError as exc:
            safety = Safety(False, f"run {record.name}'s spec cannot be read: {exc}")
        if not safety.safe:
            unsafe.append(safety.why)
        elif record.rebuilt is not None:
            # Its history came from files the same damage may have touched (runspec.run.rebuild):
            # a stop keeps the disk for a person to look at; a destroy would not.
            unsafe.append(
                f"run {record.name}'s record was rebuilt after it was damaged "
                f"({record.rebuilt.reason}): the machine is not destroyed until it "
                f"is looked at (`{command(f'rm {record.name}', layout.state)}`)"
            )
    unsafe.extend(unsafe_retired(layout))
    if unsafe:
        more = f" (and {len(unsafe) - 1} more)" if len(unsafe) > 1 else ""
        return MachineVerdict("unsafe", unsafe[0] + more)
    return MachineVerdict("safe", "every run's newest weights are verified off this machine")


def run_outcome(safety: Safety, record: RunRecord) -> Outcome:
    """How `runspec run` turned out (its exit status comes from runspec.cli)."""
    if record.termination not in SUCCESSFUL:
        return Outcome.FAILED
    if record.epoch < 1:
        return Outcome.FAILED  # the budget ended it before its first epoch: no weights
    if not safety.safe:
        return Outcome.UNVERIFIED
    return Outcome.OK
