"""A session trainer's walls (outside systemd: runspec.secrets.childwalls), and where
huggingface_hub keeps a Hub login, which neither they nor the trainer's unit
(InaccessiblePaths=) let a trainer that needs no token see. Light: the trainer child imports it
before anything else."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from runspec.secrets.childwalls import wall_in
from runspec.secrets.secretenv import trainer_needs_hub_token
from runspec.store.offlimits import layout_of_control_dir, off_limits
from runspec.trainer.control import TrainJob


def job_needs_hub_token(job: TrainJob) -> bool:
    return trainer_needs_hub_token([job.model, job.args.get("distill_model")])


def hf_home(job: TrainJob) -> Path:
    # As runspec.dataset.staging.hf_home_for reads it: the spec's env first, then ours.
    value = job.env.get("HF_HOME") or os.environ.get("HF_HOME")
    return Path(value).expanduser() if value else Path.home() / ".cache" / "huggingface"


def stored_login(job: TrainJob, environ: Mapping[str, str] = os.environ) -> list[Path]:
    """Where huggingface_hub keeps a login, as the launcher (`environ`) and as the trainer
    would look for it."""
    home = Path(environ.get("HOME") or Path.home())
    ours = Path(environ.get("HF_HOME") or home / ".cache" / "huggingface").expanduser()
    named = environ.get("HF_TOKEN_PATH")
    token = Path(named if named and named != os.devnull else ours / "token").expanduser()
    found = [
        token,
        ours / "stored_tokens",
        hf_home(job) / "token",
        hf_home(job) / "stored_tokens",
    ]
    return list(dict.fromkeys(p.absolute() for p in found))


def put_up_walls(job: TrainJob) -> None:
    """Outside systemd (a session trainer) its unit's walls are its own to put up, before the
    dataset's files and the loaders run; under its unit they change nothing. A trainer that
    needs no Hub token sees no stored login (its unit makes it inaccessible)."""
    layout = layout_of_control_dir(Path(job.control_dir))
    login = [] if job_needs_hub_token(job) else stored_login(job)
    # As its unit's read-only system: the state folder (every job folder, records, specs, push
    # manifests, the machine file) is read-only to it, but for what it writes.
    writable = [job.run_dir, Path(job.control_dir), Path(job.data).parent, hf_home(job)]
    writable.append(Path(job.weights_cache))
    walls = wall_in(off_limits(layout), login, read_only=layout.state, writable=writable)
    for refused in walls:
        print(f"runspec.trainer: {refused}", file=sys.stderr)
