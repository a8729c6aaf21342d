"""The dataset phase: libreyolo doctor on a real generated dataset, clean and broken."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runspec.budgetfit import epochs_in
from runspec.checkresult import CheckStatus
from runspec.dataset import staging
from runspec.preflight.checks import doctor_check
from runspec.preflight.profile import profile_check, train_images
from runspec.spec.loader import load_spec
from runspec.store.paths import RunPaths


@pytest.fixture(scope="module")
def synthetic_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pfdata")
    spec_path = root / "s.yaml"
    spec_path.write_text(
        "runspec: 1\nname: pfdata\ndataset:\n  synthetic: {train: 8, val: 4, imgsz: 64}\n"
        "train: {model: yolo9-t, epochs: 3, device: cpu}\nbudget: {wall_clock: 10m}\n"
    )
    spec = load_spec(spec_path)
    return staging.stage_dataset(spec, RunPaths.for_spec(spec, root / "state"), lambda _: None)


def test_doctor_passes_a_good_dataset_showing_its_warnings(synthetic_yaml: Path) -> None:
    result = doctor_check(synthetic_yaml, 64)
    assert result.status is not CheckStatus.FAIL, result
    if result.status is CheckStatus.WARN:
        assert "balance." in result.message and "training can go ahead" in result.fix


def test_doctor_errors_fail_the_preflight(synthetic_yaml: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(synthetic_yaml.parent, broken)
    text = synthetic_yaml.read_text().replace(str(synthetic_yaml.parent), str(broken))
    (broken / "data.yaml").write_text(text)
    label = sorted((broken / "labels" / "train").glob("*.txt"))[0]
    label.write_text("7 0.5 0.5 0.2 0.2\n")  # class 7 in a 3-class dataset
    result = doctor_check(broken / "data.yaml", 64)
    assert result.status is CheckStatus.FAIL
    assert "labels.class_out_of_range" in result.message
    assert "libreyolo doctor" in result.fix


def test_doctor_before_staging_says_so(tmp_path: Path) -> None:
    result = doctor_check(tmp_path / "nope" / "data.yaml", 640)
    assert result.status is CheckStatus.WARN and "not staged yet" in result.message


def test_train_images_are_counted_for_the_cost_per_epoch(synthetic_yaml: Path) -> None:
    assert train_images(synthetic_yaml) == 8


@pytest.mark.training
def test_the_profiler_gives_a_verdict_and_the_cost_per_epoch(
    synthetic_yaml: Path, tmp_path: Path
) -> None:
    spec_path = tmp_path / "prof.yaml"
    spec_path.write_text(
        "runspec: 1\nname: prof\ndataset:\n  synthetic: {train: 8, val: 4, imgsz: 64}\n"
        "train:\n  model: yolo9-t\n  epochs: 3\n  batch: 4\n  imgsz: 32\n  device: cpu\n"
        "  args: {pretrained: false, workers: 0}\n"
        "budget: {wall_clock: 10m, hourly_cost: 3.4828}\npreflight: {profile: true}\n"
    )
    spec = load_spec(spec_path)
    # A real profiled window, kept to two steps: the profiler's tracing is slow on a CPU.
    result = profile_check(spec, RunPaths.for_spec(spec, tmp_path / "state"), synthetic_yaml, 1, 2)
    assert result.status is not CheckStatus.FAIL, result
    assert "verdict host / launch" in result.message  # no GPU: the host is all there is
    assert "img/s" in result.message and "per epoch of 8 images" in result.message
    assert "$" in result.message and "a faster GPU buys nothing" in result.message
    assert "batch 4," in result.message  # the batch LibreYOLO profiled, read from its report
    # The answer comes first: three epochs of a few seconds fit in ten minutes.
    assert result.message.startswith("all 3 of your 3 epochs fit in the 10m00s wall clock")
    # What the fit counts besides the steps, measured here: a checkpoint save of the model's
    # size on the run's disk (yolo9-t's weights four times over), and the start before the
    # first step (imports, the model's build, LibreYOLO's setup), shorter than the profile.
    figures = result.figures
    assert figures["checkpoint_seconds"] > 0 and figures["checkpoint_bytes"] > 4_000_000
    assert 0 < figures["start_seconds"] < 300, figures
    assert figures["seconds_left"] == 600.0  # no run under way: the whole wall clock
    assert "s per checkpoint save" in result.message


def test_the_profile_says_how_many_epochs_fit_and_warns_when_not_all(tmp_path: Path) -> None:
    spec_path = tmp_path / "long.yaml"
    spec_path.write_text(
        "runspec: 1\nname: long\ndataset:\n  synthetic: {}\n"
        "train: {model: yolo9-t, epochs: 100, device: cpu}\n"
        "budget: {wall_clock: 1h, reserve: 10m}\n"
    )
    spec = load_spec(spec_path)
    # 50 minutes left after the reserve and the trainer's start, 60 s epochs planned 1 %
    # longer, every tenth one validating (a tenth longer): 48 of them.
    assert epochs_in(spec, 60.0, 3600.0) == 48
    assert epochs_in(spec, 1.0, 3600.0) == 100  # never more than asked for
    assert epochs_in(spec, 4000.0, 3600.0) == 0


@pytest.mark.training
def test_the_profiler_sizes_an_auto_batch_as_training_will(
    synthetic_yaml: Path, tmp_path: Path
) -> None:
    # batch -1 goes to LibreYOLO as training gets it: on a GPU its AutoBatch picks the batch
    # the run will use; on this CPU it keeps 16, and the report says which it profiled.
    spec_path = tmp_path / "auto.yaml"
    spec_path.write_text(
        "runspec: 1\nname: auto\ndataset:\n  synthetic: {train: 8, val: 4, imgsz: 64}\n"
        "train:\n  model: yolo9-t\n  epochs: 3\n  batch: -1\n  imgsz: 32\n  device: cpu\n"
        "  args: {pretrained: false, workers: 0}\n"
        "budget: {wall_clock: 10m}\npreflight: {profile: true}\n"
    )
    spec = load_spec(spec_path)
    result = profile_check(spec, RunPaths.for_spec(spec, tmp_path / "state"), synthetic_yaml, 1, 2)
    assert result.status is not CheckStatus.FAIL, result
    assert "batch 16 (auto)" in result.message
