"""A dataset cannot reach outside its folder (issue 18, item 3): its data.yaml's path:, splits
and annotations stay inside the folder that holds it, a download: is refused unless the spec
opts in, and the trainer starts with no folder it can write on its import path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from runspec.dataset.datayaml import DatasetEscape, check_data_yaml
from runspec.dataset.synthetic import generate
from tests.fixtures_run import SpecWriter, finish_run, record_of, start_run, write_spec
from tests.fixtures_training import TINY

__all__ = ["write_spec"]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return generate(tmp_path / "data", TINY)


def _edit(data_yaml: Path, **changes: object) -> Path:
    config = yaml.safe_load(data_yaml.read_text())
    config.update(changes)
    data_yaml.write_text(yaml.safe_dump(config))
    return data_yaml


def test_a_staged_dataset_of_its_own_passes(dataset: Path) -> None:
    check_data_yaml(dataset)
    check_data_yaml(_edit(dataset, path="."))


@pytest.mark.parametrize(
    "changes",
    [
        {"path": "/etc"},
        {"path": "../elsewhere"},
        {"train": "../../outside/images"},
        {"val": ["images/val", "/root/images"]},
        {"annotations": {"train": "/var/lib/runspec/jobs/x.json"}},
    ],
)
def test_a_path_outside_the_folder_is_refused(dataset: Path, changes: dict[str, object]) -> None:
    with pytest.raises(DatasetEscape, match="outside its folder"):
        check_data_yaml(_edit(dataset, **changes))


def test_a_link_out_of_the_folder_is_refused(dataset: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, dataset.parent / "images" / "escape")
    with pytest.raises(DatasetEscape, match="outside its folder"):
        check_data_yaml(_edit(dataset, train="images/escape"))


def test_a_download_needs_the_specs_opt_in(dataset: Path) -> None:
    _edit(dataset, download="https://example.invalid/data.zip")
    with pytest.raises(DatasetEscape, match="allow_download_scripts: true"):
        check_data_yaml(dataset)
    check_data_yaml(dataset, allow_download=True)


def test_a_run_whose_data_yaml_points_outside_fails_before_training(
    write_spec: SpecWriter, dataset: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    _edit(dataset, path=str(victim), download="http://127.0.0.1:9/planted.zip")
    spec = write_spec("escape", dataset={"path": str(dataset)})
    code, out = finish_run(start_run(spec, tmp_path / "state"), timeout=240)
    assert code == 1, out
    assert "outside its folder" in out
    assert record_of(tmp_path / "state", "escape")["termination"] == "failed-staging"
    assert sorted(p.name for p in victim.iterdir()) == ["keep.txt"]


def test_code_planted_in_the_trainers_working_folder_never_runs(
    write_spec: SpecWriter, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    marker = tmp_path / "planted-ran"
    planted = state / "cache" / "models" / "runspec"  # the trainer's working directory
    planted.mkdir(parents=True)
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (planted / "trainer.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    spec = write_spec("planted", epochs=1)
    code, out = finish_run(start_run(spec, state), timeout=400)
    assert not marker.exists(), out
    assert "training completed" in out
    assert code == 3, out  # completed; no push section, so nothing verified
    shutil.rmtree(planted)
