"""Where a run's files live. DESIGN.md gives the defaults; the spec and config override them.
Relative paths in a spec are relative to the state folder.

    <state>/inbox/               specs waiting (the daemon's watched folder)
    <state>/claimed/             specs the daemon took from the inbox, until accepted
    <state>/runs/<name>/         LibreYOLO's run folder (unless output.project says otherwise)
    <state>/data/                staged datasets (unless dataset.extract_to says otherwise)
    <state>/cache/weights/       the trainer's working directory: pretrained downloads persist
    <state>/scheduler.sqlite     the daemon's APScheduler job store; runspecd.lock beside it
    <state>/jobs/<name>/         runspec's own files for the run:
        record.json              the RunRecord
        spec.yaml                the spec as received; provenance.json beside it
        runspec.log              the lifecycle's log for this run (pushed with it)
        train_job.json           what the trainer was started with
        trainer.json             its identity (unit or pid, start time, boot id)
        control/                 the trainer's side: stop, deadline, epoch.json, result.json
        staged/                  verified-complete copies of checkpoints, ready to push
        pushed.json              the manifest of the last verified push
        failsafe.json            the failsafe timer armed for the run, if any
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from runspec.model import Spec


def default_state_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/var/lib/runspec")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "runspec"


def resolve_under(state: Path, path: Path | None) -> Path | None:
    if path is None:
        return None
    path = path.expanduser()
    return path if path.is_absolute() else state / path


@dataclass(frozen=True)
class RunPaths:
    state: Path
    name: str
    project: Path
    data_root: Path

    @classmethod
    def for_spec(cls, spec: Spec, state: Path) -> RunPaths:
        state = state.absolute()
        project = resolve_under(state, spec.output.project) or state / "runs"
        data_root = resolve_under(state, spec.dataset.extract_to) or state / "data"
        return cls(state=state, name=spec.name, project=project, data_root=data_root)

    def resolve(self, path: Path) -> Path:
        """A path from the spec: relative paths are relative to the state folder."""
        return path if path.is_absolute() else self.state / path

    @property
    def run_dir(self) -> Path:
        return self.project / self.name

    @property
    def job_dir(self) -> Path:
        return self.state / "jobs" / self.name

    @property
    def control_dir(self) -> Path:
        return self.job_dir / "control"

    @property
    def staged_dir(self) -> Path:
        return self.job_dir / "staged"

    @property
    def weights_cache(self) -> Path:
        return self.state / "cache" / "weights"
