"""Where everything runspec writes lives: the one author of the state folder's layout.

<state>/inbox/               specs waiting (the daemon's watched folder, unless configured)
<state>/claimed/             specs the daemon took from the inbox, until accepted
<state>/runs/<name>/         LibreYOLO's run folder (unless output.project or the config's
                             `runs:` says otherwise)
<state>/data/                staged datasets (unless dataset.extract_to or `data:`)
<state>/cache/models/        the weights cache: pretrained downloads persist in its weights/
<state>/runspecd.lock        held by the one daemon of this state folder
<state>/machine.json         the machine's end: a pending finish and how far it got
<state>/machine.lock         held while the machine's end is decided or applied
<state>/retired/             tombstones of runs retired by `rm --force` with weights left
                             behind unverified (runspec.store.tombstone)
<state>/jobs/<name>/         runspec's own files for the run:
    paths.json               where its run folder and data are (decided once, at accept)
    record.json              the RunRecord (record.damaged-*.json: a damaged one set aside)
    owner.lock               held by whoever drives the run (the daemon or `runspec run`)
    spec.yaml                the spec as received; provenance.json beside it
    runspec.log              the lifecycle's log for this run (pushed with it)
    cancel.json              a request to cancel the run, for whoever drives it
    cancel.lock              held while `cancel` or the run's driver looks at the request
                             and decides the run's end (runspec.store.cancelgate)
    train_job.json           what the trainer was started with
    trainer.json             its identity (unit or pid, start time, boot id)
    control/                 the trainer's side: stop, deadline, epoch.json, result.json
    staged/                  verified-complete copies of checkpoints, ready to push
    pushed.json              the manifest of the last verified push
    failsafe.json            the failsafe timer armed for the run, and what it did
    transfer.json            the download, extraction or push under way (for `status`)
    report/                  what the final push carries besides the run folder: the
                             training curves (curves.png) and the model card (README.md);
                             the live run's first card (first-card.md), pushed apart
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from runspec.spec.model import Spec
from runspec.spec.safepaths import CACHE, CLAIMED, INBOX, JOBS
from runspec.store.atomic import write_json_atomic

# The daemon's EnvironmentFile (systemd/runspecd.service): secrets live there, 0600.
ENV_FILE = Path("/etc/runspec/env")
CONFIG_FILE = Path("/etc/runspec/runspecd.yaml")  # the daemon's config, by default
RECORD = "record.json"  # a run's record, in its job folder
REJECTED = "rejected"  # the inbox's folder of refused specs, each with its .error


def rejected_dir(inbox: Path) -> Path:
    return inbox / REJECTED


STATE_VARIABLE = "RUNSPEC_STATE"  # the state folder for every command without --state


def default_state_dir() -> Path:
    if chosen := os.environ.get(STATE_VARIABLE):
        return Path(chosen)
    if os.geteuid() == 0:
        return Path("/var/lib/runspec")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "runspec"


def provenance_sidecar(inbox: Path, name: str) -> Path:
    """Where `runspec submit` leaves a spec's provenance (a dotfile, so the inbox ignores it)."""
    return inbox / f".{name}.provenance.json"


def resolve_under(state: Path, path: Path | None) -> Path | None:
    if path is None:
        return None
    path = path.expanduser()
    return path if path.is_absolute() else state / path


@dataclass(frozen=True)
class StateLayout:
    """The state folder's own files and folders."""

    state: Path

    @property
    def inbox(self) -> Path:
        return self.state / INBOX

    @property
    def claimed(self) -> Path:
        return self.state / CLAIMED

    @property
    def jobs(self) -> Path:
        return self.state / JOBS

    @property
    def runs(self) -> Path:
        return self.state / "runs"

    @property
    def data(self) -> Path:
        return self.state / "data"

    @property
    def daemon_lock(self) -> Path:
        return self.state / "runspecd.lock"

    @property
    def machine_file(self) -> Path:
        return self.state / "machine.json"

    @property
    def machine_lock(self) -> Path:
        return self.state / "machine.lock"

    @property
    def retired(self) -> Path:
        return self.state / "retired"

    @property
    def daemon_pid(self) -> Path:
        return self.state / "runspecd.pid"

    @property
    def daemon_log(self) -> Path:
        return self.state / "runspecd.log"

    @property
    def follow(self) -> Path:
        """The followed repositories' mirrors, ledger and status (runspec.daemon.follow)."""
        return self.state / "follow"

    @property
    def follow_status(self) -> Path:
        return self.follow / "status.json"

    def job_dir(self, name: str) -> Path:
        return self.jobs / name

    # A job folder's fixed files, named without reading anything (paths.json is only needed
    # for the movable folders): the loop looks at these for every run.
    def spec_file(self, name: str) -> Path:
        return self.job_dir(name) / "spec.yaml"

    def cancel_file(self, name: str) -> Path:
        return self.job_dir(name) / "cancel.json"

    def record_file(self, name: str) -> Path:
        return self.job_dir(name) / RECORD

    def names(self) -> list[str]:
        """Every run with a job folder, by name."""
        try:
            return sorted(p.name for p in self.jobs.iterdir() if p.is_dir())
        except FileNotFoundError:
            return []

    def run_paths(self, name: str) -> RunPaths:
        """A run's paths as decided when it was accepted."""
        return RunPaths.load(self.state, name)


@dataclass(frozen=True)
class RunPaths:
    state: Path
    name: str
    project: Path
    data_root: Path

    @classmethod
    def decide(
        cls, spec: Spec, state: Path, runs: Path | None = None, data: Path | None = None
    ) -> RunPaths:
        """Where a new run's folders go: the spec's own choice, else the daemon config's
        `runs:` and `data:`, else the state folder's defaults. Decided once, at accept."""
        state = state.absolute()
        layout = StateLayout(state)
        project = resolve_under(state, spec.output.project) or runs or layout.runs
        data_root = resolve_under(state, spec.dataset.extract_to) or data or layout.data
        return cls(state=state, name=spec.name, project=project, data_root=data_root)

    @classmethod
    def for_spec(cls, spec: Spec, state: Path) -> RunPaths:
        """The paths of a run accepted before, else the defaults for a new one."""
        saved = cls._saved(state.absolute(), spec.name)
        return saved or cls.decide(spec, state)

    @classmethod
    def load(cls, state: Path, name: str) -> RunPaths:
        state = state.absolute()
        saved = cls._saved(state, name)
        if saved is not None:
            return saved
        layout = StateLayout(state)
        return cls(state=state, name=name, project=layout.runs, data_root=layout.data)

    @classmethod
    def _saved(cls, state: Path, name: str) -> RunPaths | None:
        try:
            data = json.loads((StateLayout(state).job_dir(name) / "paths.json").read_text())
            # Folders inside the state folder are kept relative to it, so a state folder seen
            # at another path (a restored backup, a container's bind mount) still finds them.
            project, data_root = state / data["project"], state / data["data_root"]
            return cls(state, name, project, data_root)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self) -> None:
        def kept(path: Path) -> str:
            return str(path.relative_to(self.state) if path.is_relative_to(self.state) else path)

        data = {"project": kept(self.project), "data_root": kept(self.data_root)}
        write_json_atomic(self.paths_file, data, mode=0o644)

    def resolve(self, path: Path) -> Path:
        """A path from the spec: relative paths are relative to the state folder."""
        return path if path.is_absolute() else self.state / path

    @property
    def layout(self) -> StateLayout:
        return StateLayout(self.state)

    @property
    def run_dir(self) -> Path:
        return self.project / self.name

    @property
    def job_dir(self) -> Path:
        return self.layout.job_dir(self.name)

    @property
    def paths_file(self) -> Path:
        return self.job_dir / "paths.json"

    @property
    def record_file(self) -> Path:
        return self.job_dir / RECORD

    @property
    def disk_note(self) -> Path:
        return self.job_dir / "disk.json"

    @property
    def owner_lock(self) -> Path:
        return self.job_dir / "owner.lock"

    @property
    def spec_file(self) -> Path:
        return self.layout.spec_file(self.name)

    @property
    def provenance_file(self) -> Path:
        return self.job_dir / "provenance.json"

    @property
    def public_provenance_file(self) -> Path:
        """The provenance as pushed: no machine paths, user or host (spec.provenance.public)."""
        return self.job_dir / "provenance.public.json"

    @property
    def receipt_file(self) -> Path:
        """The receipt pushed after the final weights verified (runspec.push.receipt)."""
        return self.job_dir / "receipt.json"

    @property
    def end_file(self) -> Path:
        """The machine's end as the box saw it confirmed, as pushed (push.endconfirm)."""
        return self.receipt_file.with_name("end.json")

    @property
    def runspec_log(self) -> Path:
        return self.job_dir / "runspec.log"

    @property
    def cancel_file(self) -> Path:
        return self.layout.cancel_file(self.name)

    @property
    def cancel_lock(self) -> Path:
        return self.job_dir / "cancel.lock"

    @property
    def train_job_file(self) -> Path:
        return self.job_dir / "train_job.json"

    @property
    def trainer_file(self) -> Path:
        return self.job_dir / "trainer.json"

    @property
    def control_dir(self) -> Path:
        return self.job_dir / "control"

    @property
    def staged_dir(self) -> Path:
        return self.job_dir / "staged"

    @property
    def pushed_manifest(self) -> Path:
        return self.job_dir / "pushed.json"

    @property
    def lease_file(self) -> Path:
        """The last lease this box wrote to the Hub (runspec.watch.renew), for `status`."""
        return self.job_dir / "lease.json"

    @property
    def failsafe_file(self) -> Path:
        return self.job_dir / "failsafe.json"

    @property
    def failsafe_watch(self) -> Path:
        return self.job_dir / "failsafe-watch.json"

    @property
    def failsafe_log(self) -> Path:
        return self.job_dir / "failsafe.log"

    @property
    def transfer_file(self) -> Path:
        return self.job_dir / "transfer.json"

    @property
    def report_dir(self) -> Path:
        return self.job_dir / "report"

    @property
    def curves_png(self) -> Path:
        return self.report_dir / "curves.png"

    @property
    def model_card(self) -> Path:
        return self.report_dir / "README.md"

    @property
    def first_card(self) -> Path:
        """The card of a live run, apart from the final one the pusher's thread could race."""
        return self.report_dir / "first-card.md"

    @property
    def weights_cache(self) -> Path:
        # The trainer's folder: LibreYOLO downloads into weights/ there (cache/models/weights/).
        return self.state / CACHE / "models"
