"""Relative `dataset.path` and `train.model` paths mean the spec file's folder, whatever the
state folder and the working directory: through `runspec preflight`, `submit` and the accepted
run's spec (issue 23)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runspec.run.accept import accept
from runspec.secrets.secretenv import spec_models, trainer_needs_hub_token
from runspec.spec.loader import load_accepted, load_spec
from runspec.spec.specbase import resolved_paths
from runspec.store.paths import StateLayout

RUNSPEC = [sys.executable, "-m", "runspec"]
SPEC = """runspec: 1
name: {name}
budget: {{wall_clock: 10m}}
dataset: {{path: data/data.yaml}}
train: {{model: weights/start.pt, epochs: 1, device: cpu}}
preflight: {{doctor: false}}
"""


def _project(tmp_path: Path, name: str) -> Path:
    """A spec in its own folder, beside its data.yaml and its starting weights."""
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "data.yaml").write_text("path: .\ntrain: images\nval: images\nnames: [a]\n")
    (project / "weights").mkdir()
    (project / "weights" / "start.pt").write_bytes(b"not really weights")
    spec = project / f"{name}.yaml"
    spec.write_text(SPEC.format(name=name))
    return spec


def _runspec(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNSPEC, *args], capture_output=True, text=True, timeout=300, check=False, cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )  # fmt: skip


def test_preflight_finds_the_dataset_beside_the_spec(tmp_path: Path) -> None:
    spec = _project(tmp_path, "beside")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = _runspec(
        "preflight", str(spec), "--state", str(tmp_path / "state"), "--json", cwd=elsewhere
    )
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    data_yaml = spec.parent / "data" / "data.yaml"
    assert checks["dataset"]["status"] == "pass", checks["dataset"]
    assert str(data_yaml) in checks["dataset"]["message"]


def test_submit_records_the_resolved_paths_and_the_run_keeps_them(tmp_path: Path) -> None:
    spec = _project(tmp_path, "kept")
    state = tmp_path / "state"
    (state / "inbox").mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    out = _runspec("submit", str(spec), "--state", str(state), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    sidecar = json.loads((state / "inbox" / ".kept.yaml.provenance.json").read_text())
    assert sidecar["resolved"] == {
        "dataset.path": str(spec.parent / "data" / "data.yaml"),
        "train.model": str(spec.parent / "weights" / "start.pt"),
    }
    # Accepted (as the daemon does, with that provenance), its saved spec keeps meaning them.
    accept(load_spec(spec), state, sidecar)
    saved = load_accepted(StateLayout(state).run_paths("kept").spec_file)
    assert saved.dataset.path == spec.parent / "data" / "data.yaml"
    assert saved.train.model == str(spec.parent / "weights" / "start.pt")


@pytest.mark.parametrize(
    "model",
    [
        "someorg/private-detector",
        "hf://someorg/detector@v2/best.pt",
        "https://huggingface.co/someorg/detector/resolve/main/best.pt",
    ],
)
def test_a_hub_model_in_a_spec_file_stays_a_hub_reference(tmp_path: Path, model: str) -> None:
    # Issue 34: rebased as a relative path, `someorg/private-detector` became
    # /the/spec/folder/someorg/private-detector, never reached the Hub, and the trainer got no
    # token for it. LibreYOLO takes these names itself (notes/libreyolo.md: the model factory
    # loads `owner/repo` and `hf://`).
    spec = _project(tmp_path, "hubmodel")
    spec.write_text(SPEC.format(name="hubmodel").replace("weights/start.pt", f"'{model}'"))
    loaded = load_spec(spec)
    assert loaded.train.model == model
    assert trainer_needs_hub_token(spec_models(loaded))
    assert "train.model" not in resolved_paths(loaded)


def test_a_local_folder_that_looks_like_a_repo_is_still_the_spec_folders(tmp_path: Path) -> None:
    spec = _project(tmp_path, "localmodel")
    spec.write_text(SPEC.format(name="localmodel").replace("weights/start.pt", "./org/model"))
    assert load_spec(spec).train.model == str(spec.parent / "org" / "model")
