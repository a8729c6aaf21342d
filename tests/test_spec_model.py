"""The typed Spec a valid file becomes: defaults, durations, sizes, device, imgsz, env."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from runspec.errors import SpecInvalid, UsageError
from runspec.spec.loader import check_spec_file, load_spec, load_spec_text, schema
from runspec.spec.model import (
    DEFAULT_PUSH_FILES,
    FinishAction,
    PreflightSpec,
    PushSpec,
    TrainSpec,
    Unverified,
)
from runspec.units import parse_duration

REPO = Path(__file__).resolve().parent.parent


def _with(base: str, old: str, new: str) -> str:
    assert old in base
    return base.replace(old, new)


def test_defaults_are_applied(spec_minimal_text: str) -> None:
    spec = load_spec_text(spec_minimal_text, "m.yaml")
    assert spec.train.batch == 16
    assert spec.train.imgsz == 640
    assert spec.train.device == "all"
    assert spec.train.save_period == 3  # 10, or epochs when fewer
    assert spec.train.restarts == 2
    assert dict(spec.train.args) == {}
    assert spec.budget.wall_clock == 600.0
    assert spec.budget.reserve is None  # auto
    assert spec.budget.overrun == 1200.0
    assert spec.budget.hourly_cost is None
    assert spec.push is None
    assert spec.finish.action is FinishAction.NONE
    assert spec.finish.provider == "auto"
    assert spec.finish.unverified is Unverified.STOP
    assert spec.finish.command == ()
    assert spec.preflight == PreflightSpec(True, True, None, True, False)
    assert dict(spec.env) == {}
    assert spec.output.project is None
    assert spec.dataset.synthetic is not None
    assert (spec.dataset.synthetic.train, spec.dataset.synthetic.imgsz) == (8, 128)
    assert spec.description == ""


def test_save_period_defaults_to_ten_with_more_epochs(spec_minimal_text: str) -> None:
    spec = load_spec_text(_with(spec_minimal_text, "epochs: 3", "epochs: 40"), "m.yaml")
    assert spec.train.save_period == 10


def test_the_schema_states_the_same_defaults_as_the_model() -> None:
    props = schema()["properties"]
    train = props["train"]["properties"]
    for name in ("batch", "imgsz", "device", "save_period", "restarts"):
        default = next(f.default for f in dataclasses.fields(TrainSpec) if f.name == name)
        assert train[name]["default"] == default, name
    assert parse_duration(props["push"]["properties"]["every"]["default"]) == PushSpec.every
    assert tuple(props["push"]["properties"]["files"]["default"]) == DEFAULT_PUSH_FILES
    assert parse_duration(props["budget"]["properties"]["overrun"]["default"]) == 1200.0
    assert props["budget"]["properties"]["reserve"]["default"] == "auto"
    finish = props["finish"]["properties"]
    assert (finish["action"]["default"], finish["unverified"]["default"]) == ("none", "stop")
    assert finish["provider"]["default"] == "auto"
    pre = props["preflight"]["properties"]
    assert {k: pre[k]["default"] for k in ("matmul", "collective", "doctor", "profile")} == {
        "matmul": True,
        "collective": True,
        "doctor": True,
        "profile": False,
    }


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        ("90m", 5400.0),
        ("1h30m", 5400.0),
        ("45s", 45.0),
        ("1d12h", 129600.0),
        ("3600s", 3600.0),
        ("0.5h", 1800.0),
        ("2.5s", 2.5),
        ("30d", 30 * 86400.0),
    ],
)
def test_durations_become_seconds(spec_minimal_text: str, written: str, seconds: float) -> None:
    spec = load_spec_text(
        _with(spec_minimal_text, "wall_clock: 10m", f"wall_clock: {written}"), "m"
    )
    assert spec.budget.wall_clock == seconds


@pytest.mark.parametrize(
    ("written", "device"),
    [
        ("0", "0"),
        ("3", "3"),
        ('"0"', "0"),
        ('"0,1,2,3"', "0,1,2,3"),
        ("cpu", "cpu"),
        ("all", "all"),
        ('"2,0"', "2,0"),
    ],
)
def test_device_is_normalised(spec_minimal_text: str, written: str, device: str) -> None:
    text = _with(spec_minimal_text, "epochs: 3", f"epochs: 3\n  batch: 8\n  device: {written}")
    spec = load_spec_text(text, "m")
    assert spec.train.device == device
    assert isinstance(spec.train.device, str)


def test_imgsz_as_height_by_width(spec_minimal_text: str) -> None:
    spec = load_spec_text(_with(spec_minimal_text, "epochs: 3", "epochs: 3\n  imgsz: 480x640"), "m")
    assert spec.train.imgsz == (480, 640)


def test_sizes_become_bytes(spec_minimal_text: str) -> None:
    for written, size in (
        ("120GB", 120 * 10**9),
        ("1.5TiB", int(1.5 * 2**40)),
        ("500MiB", 500 * 2**20),
    ):
        spec = load_spec_text(spec_minimal_text + f"preflight:\n  disk: {written}\n", "m")
        assert spec.preflight.disk == size


def test_env_values_become_strings(spec_minimal_text: str) -> None:
    text = (
        spec_minimal_text + "env:\n  A: true\n  B: 12\n  C: 0.5\n  D: off\n  E: '017'\n  F: 017\n"
    )
    spec = load_spec_text(text, "m")
    assert dict(spec.env) == {"A": "true", "B": "12", "C": "0.5", "D": "off", "E": "017", "F": "17"}


def test_args_keys_become_underscored(spec_minimal_text: str) -> None:
    text = _with(spec_minimal_text, "epochs: 3", "epochs: 3\n  args: {warmup-epochs: 1, lr0: 0.1}")
    spec = load_spec_text(text, "m")
    assert dict(spec.train.args) == {"warmup_epochs": 1, "lr0": 0.1}


def test_paths_are_kept_as_given(spec_minimal_text: str) -> None:
    text = _with(spec_minimal_text, "synthetic: {}", "synthetic: {}\n  extract_to: data/here")
    text += "output:\n  project: /abs/runs\npush:\n  dir: pushed\n"
    spec = load_spec_text(text, "m")
    assert spec.dataset.extract_to == Path("data/here")
    assert spec.output.project == Path("/abs/runs")
    assert spec.push is not None and spec.push.dir == Path("pushed") and spec.push.hub is None


def test_hub_sources_and_targets(spec_minimal_text: str) -> None:
    text = _with(
        spec_minimal_text,
        "  synthetic: {}\n",
        "  hub: {repo: org/ds, file: d.tar}\n  data: d/data.yaml\n",
    )
    text += "push:\n  hub: {repo: org/run}\nfinish:\n  action: destroy\n  provider: vast\n"
    spec = load_spec_text(text, "m")
    assert spec.dataset.hub is not None
    assert (spec.dataset.hub.repo, spec.dataset.hub.file, spec.dataset.hub.revision) == (
        "org/ds",
        "d.tar",
        None,
    )
    assert spec.dataset.data == "d/data.yaml" and spec.dataset.synthetic is None
    assert spec.push is not None and spec.push.hub is not None
    assert (spec.push.hub.repo, spec.push.hub.private) == ("org/run", True)
    assert spec.finish.action is FinishAction.DESTROY and spec.finish.provider == "vast"


def test_quickstart_is_the_demo_the_readme_promises() -> None:
    spec = load_spec(REPO / "specs" / "quickstart.yaml")
    assert spec.dataset.synthetic is not None
    assert dataclasses.asdict(spec.dataset.synthetic) == {
        "train": 32,
        "val": 8,
        "imgsz": 64,
        "classes": 1,
        "seed": 0,
    }
    t = spec.train
    assert (t.model, t.epochs, t.batch, t.imgsz, t.device, t.save_period) == (
        "yolo9-t",
        20,
        4,
        64,
        "cpu",
        10,
    )
    # What makes it learn in its few minutes (issue 23): AdamW, a short warmup, no mosaic.
    assert dict(t.args) == {
        "pretrained": False,
        "workers": 0,
        "eval_interval": 1,
        "warmup_epochs": 1,
        "mosaic": 0.0,
        "optimizer": "adamw",
        "lr0": 0.002,
    }
    assert dict(spec.env) == {"OMP_NUM_THREADS": "1"}
    assert spec.push is not None and spec.push.dir == Path("pushed") and spec.push.every == 60.0
    assert (spec.budget.wall_clock, spec.budget.hourly_cost) == (900.0, 3.4828)
    assert spec.finish.action is FinishAction.NONE


def test_long_run_auto_carries_storage_figures() -> None:
    spec = load_spec(REPO / "specs" / "long-run-auto.yaml")
    assert spec.finish.action is FinishAction.AUTO
    assert spec.finish.storage is not None
    assert spec.finish.storage.return_within == 12 * 3600.0
    assert spec.train.imgsz == (480, 640)
    assert spec.budget.reserve == 45 * 60.0


def test_provenance_fields(spec_file: Callable[..., Path], spec_minimal_text: str) -> None:
    raw = ("# café\n" + spec_minimal_text).encode("utf-8")
    path = spec_file(raw)
    spec = load_spec(path)
    assert spec.sha256 == hashlib.sha256(raw).hexdigest()
    assert spec.text == raw.decode("utf-8")
    assert spec.source == str(path)


def test_the_spec_is_frozen(spec_minimal_text: str) -> None:
    spec = load_spec_text(spec_minimal_text, "m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.train.args["lr0"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        spec.env["X"] = "1"  # type: ignore[index]


def test_invalid_text_raises_spec_invalid_with_every_problem(spec_minimal_text: str) -> None:
    text = _with(spec_minimal_text, "epochs: 3", "epochs: 0\n  batch: zero") + "pushh: 1\n"
    with pytest.raises(SpecInvalid) as raised:
        load_spec_text(text, "bad.yaml")
    pointers = [p.pointer for p in raised.value.problems]
    assert pointers == ["/train/epochs", "/train/batch", "/pushh"]
    assert str(raised.value).splitlines()[0].startswith("bad.yaml:7:11: /train/epochs: ")


def test_an_unreadable_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read"):
        check_spec_file(tmp_path / "missing.yaml")
    with pytest.raises(UsageError):
        load_spec(tmp_path)  # a folder
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        check_spec_file(fifo)  # refused, not waited on


def test_an_oversized_file_is_refused_without_reading_it_all(
    spec_file: Callable[..., Path],
) -> None:
    path = spec_file(b"a: 1\n" + b"#" * (5 * 2**20) + b"\n")
    problems = check_spec_file(path)
    assert len(problems) == 1 and "5,242,886 bytes" in problems[0].message
