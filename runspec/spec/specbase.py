"""Relative paths in a spec mean the spec file's folder: `dataset.path: data/coco.yaml` next to
the spec, as a person reads it (and as `train.model: runs/best.pt` is read), not the state
folder's or wherever the command runs. A Hub model (`owner/repo`, `hf://...`) or a URL is no
path: it stays as written, for LibreYOLO to fetch.

The spec's text stays as written (its sha256 is its identity); the paths are resolved when it
is built. For an accepted run, the folder is the one its provenance names (`spec_dir`, or the
folder of its `source_path`): `runspec submit` and `runspec run` record it, and submit records
the resolved paths too. A spec dropped into the inbox by hand has no folder of its own: its
relative paths keep meaning the state folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runspec.spec.model import Spec
from runspec.spec.modelnames import is_local_path

PROVENANCE = "provenance.json"  # beside an accepted spec.yaml (runspec.store.paths)


def _relative_path(model: str) -> bool:
    return is_local_path(model) and not Path(model).is_absolute()


def rebase(data: dict[str, Any], base: Path) -> dict[str, str]:
    """Make the spec's relative `dataset.path` and `train.model` path absolute under `base`,
    in place; what was resolved, by key."""
    resolved: dict[str, str] = {}
    dataset, train = data.get("dataset"), data.get("train")
    path = dataset.get("path") if isinstance(dataset, dict) else None
    if isinstance(dataset, dict) and isinstance(path, str) and not Path(path).is_absolute():
        dataset["path"] = resolved["dataset.path"] = str(base / path)
    model = train.get("model") if isinstance(train, dict) else None
    if isinstance(train, dict) and isinstance(model, str) and _relative_path(model):
        train["model"] = resolved["train.model"] = str(base / model)
    return resolved


def accepted_base(spec_file: Path) -> Path | None:
    """The folder an accepted spec's relative paths mean, from the provenance beside it."""
    try:
        provenance = json.loads((spec_file.parent / PROVENANCE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(provenance, dict):
        return None
    folder = provenance.get("spec_dir")
    if not isinstance(folder, str):
        source = provenance.get("source_path")
        folder = str(Path(source).parent) if isinstance(source, str) else None
    return Path(folder) if folder and Path(folder).is_absolute() else None


def resolved_paths(spec: Spec) -> dict[str, str]:
    """The spec's file paths as they were resolved, for its provenance."""
    found = {"dataset.path": str(spec.dataset.path) if spec.dataset.path else None}
    if is_local_path(spec.train.model):
        found["train.model"] = spec.train.model
    return {key: value for key, value in found.items() if value}
