"""Whether the dataset the spec names exists at all: a FAIL at hour 0, not at staging.

Three mistakes a new spec makes and the doctor words badly or too late: a Hub dataset repo (or
file, or revision) that is not there, a `dataset.path` that is not on this machine, and a
data.yaml whose `path:` is an absolute folder from the machine the dataset was made on.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from runspec import hubreach
from runspec.checkresult import CheckResult, failed, passed
from runspec.dataset.repofiles import repo_files
from runspec.dataset.staging import expected_data_yaml
from runspec.spec.model import HubDataset, Spec
from runspec.store.paths import RunPaths


def dataset_missing(hub: HubDataset, exc: BaseException) -> CheckResult | None:
    """A FAIL for what the Hub said for sure while asked about `hub` (no such repo, revision
    or file) or for a Hub that cannot be reached; None for anything less certain."""
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"dataset repo {hub.repo}"
    if isinstance(exc, GatedRepoError):
        return failed(
            "dataset", f"{where} is gated: the token may not read it", _fix_token(hub.repo)
        )
    if isinstance(exc, RepositoryNotFoundError):
        return failed(
            "dataset",
            f"{where} does not exist on the Hub, or the token may not read it",
            f"fix dataset.hub.repo (a dataset repo: huggingface.co/datasets/{hub.repo}), "
            "or give the daemon a token that may read it (HF_TOKEN)",
        )
    if isinstance(exc, RevisionNotFoundError):
        return failed(
            "dataset",
            f"{where} has no revision {hub.revision!r}",
            "fix dataset.hub.revision (a branch, tag or commit of the dataset repo)",
        )
    if isinstance(exc, EntryNotFoundError):
        revision = f" at {hub.revision}" if hub.revision else ""
        return failed(
            "dataset",
            f"{where} has no file {hub.file!r}{revision}",
            "fix dataset.hub.file: the tar's path inside the dataset repo" + repo_files(hub),
        )
    cannot = hubreach.unreachable(exc)
    if cannot is not None:
        said = f"{cannot} (asking for {hub.repo}/{hub.file})"
        return replace(failed("dataset", said, hubreach.UNREACHABLE_FIX), transient=True)
    return None


def _fix_token(repo: str) -> str:
    return f"accept the dataset's terms on huggingface.co/datasets/{repo} with the token's user"


def path_check(spec: Spec, data_yaml: Path) -> CheckResult | None:
    """`dataset.path` names a data.yaml that is here (a path dataset has no staging)."""
    if spec.dataset.path is None:
        return None
    if data_yaml.is_file():
        return passed("dataset", f"dataset.path {data_yaml} is here")
    relative = "" if spec.dataset.path.is_absolute() else f" ({spec.dataset.path} resolved)"
    return failed(
        "dataset",
        f"dataset.path {data_yaml}{relative} does not exist on this machine",
        "copy the dataset there, or fix dataset.path (the data.yaml's path)",
    )


def data_yaml_root_check(data_yaml: Path) -> CheckResult | None:
    """A data.yaml's absolute `path:` that is not on this machine: the splits are looked
    for under it, so the doctor would only say "'train' path(s) do not exist"."""
    try:
        config = yaml.safe_load(data_yaml.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None  # the doctor reports a data.yaml it cannot read, in its own words
    if not isinstance(config, dict) or not isinstance(config.get("path"), str):
        return None
    root = Path(config["path"])
    if not root.is_absolute() or root.exists():
        return None
    split = config.get("train")
    under = f"; its splits are looked for under it (train: {root / split})" if split else ""
    return failed(
        "dataset",
        f"{data_yaml} says `path: {root}`, a folder that does not exist on this machine: an "
        f"absolute path from the machine the dataset was made on{under}",
        f"remove the `path:` line from {data_yaml.name} (the splits then resolve against its "
        "own folder) and push the dataset again",
    )


def staged_checks(spec: Spec, paths: RunPaths) -> list[CheckResult]:
    """What the machine phase can tell about the dataset before anything is downloaded."""
    found = path_check(spec, expected_data_yaml(spec, paths))
    return [found] if found is not None else []
