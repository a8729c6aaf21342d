"""`train.model` is checked before anything is downloaded: against a table of LibreYOLO's names
kept true to the installed LibreYOLO, without importing it in `validate`; and the preflight
finds the weights a pretrained model needs, or says they cannot be had."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runspec.checkresult import CheckStatus
from runspec.preflight import checks
from runspec.spec import modelnames as models
from runspec.spec.loader import load_spec_text
from runspec.store.paths import RunPaths
from tests.fixtures_providers import Answer, StandIn


def test_the_table_is_the_installed_libreyolos() -> None:
    table = json.loads(models.TABLE.read_text())
    assert table == models.generate(), "regenerate it: python -m runspec.spec.modelnames"
    assert models.weights_file("yolo9-t") == "LibreYOLO9t.pt"
    assert models.weights_file("LibreYOLO9s.pt") == "LibreYOLO9s.pt"


def test_an_unknown_model_is_refused_with_a_did_you_mean_and_no_libreyolo(tmp_path: Path) -> None:
    spec = tmp_path / "typo.yaml"
    spec.write_text(
        "runspec: 1\nname: typo\ndataset: {synthetic: {}}\n"
        "train: {model: yolo9-tt, epochs: 1}\nbudget: {wall_clock: 1h}\n"
    )
    probe = (
        "import sys, runspec.cli as c; code = c.main(['validate', sys.argv[1]]);"
        "print('libreyolo' in sys.modules, 'torch' in sys.modules); sys.exit(code)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(spec)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 1, out.stderr  # validate: the answer is "invalid" (issue 23)
    assert "/train/model: 'yolo9-tt' is not a model LibreYOLO knows; did you mean 'yolo9-t'?" in (
        out.stdout
    )
    assert out.stdout.strip().endswith("False False")  # neither was imported
    for fine in ("yolo9-t", "LibreYOLO9s.pt", "best.pt", "/ckpt/run.pt", "me/my-model"):
        assert models.problem(fine) is None, fine
    assert models.problem("./yolov9s.pt") is None  # a checkpoint of that name, as a path


@pytest.mark.parametrize(
    ("model", "meant"), [("yolov9s.pt", "yolo9-s"), ("YOLOv9t.pt", "yolo9-t"), ("yolox-s", None)]
)
def test_an_ultralytics_name_gets_libreyolos_name_for_it(model: str, meant: str | None) -> None:
    said = models.problem(model)
    if meant is None:
        assert said is None or "Ultralytics" not in said
        return
    assert said is not None and "is an Ultralytics weights name" in said
    assert f"did you mean {meant!r}?" in said and f"given as a path (./{model})" in said


def test_an_ultralytics_model_libreyolo_lacks_is_still_refused_before_any_download() -> None:
    said = models.problem("yolo11n.pt")
    assert said is not None and "is an Ultralytics weights name" in said
    assert "did you mean" not in said  # LibreYOLO has no YOLO11: no name is made up


def _spec(model: str, pretrained: bool) -> object:
    text = (
        "runspec: 1\nname: w\ndataset: {synthetic: {}}\n"
        f"train: {{model: {model}, epochs: 1, args: {{pretrained: {str(pretrained).lower()}}}}}\n"
        "budget: {wall_clock: 1h}\n"
    )
    return load_spec_text(text, "w.yaml")


def test_the_weights_are_found_or_the_preflight_says_why_not(
    tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    spec = _spec("yolo9-t", pretrained=True)
    paths = RunPaths.for_spec(spec, state)  # type: ignore[arg-type]
    assert checks.weights_check(_spec("yolo9-t", False), paths).status is CheckStatus.PASS  # type: ignore[arg-type]
    # LibreYOLO's own download host cannot exist here: its URL is the one seam replaced.
    standin.on("HEAD", r"/LibreYOLO9t.pt", Answer(404, "no such file"))
    monkeypatch.setattr(checks, "_download_url", lambda m, f: (f"{standin.url}/{f}", ""))
    missing = checks.weights_check(spec, paths)  # type: ignore[arg-type]
    assert missing.status is CheckStatus.FAIL and "answers HTTP 404" in missing.message
    assert "train.args.pretrained: false" in missing.fix
    assert "weights/weights" not in missing.message + missing.fix  # a path a person reads
    cached = paths.weights_cache / "weights" / "LibreYOLO9t.pt"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"weights")
    found = checks.weights_check(spec, paths)  # type: ignore[arg-type]
    assert found.status is CheckStatus.PASS and "weights/weights" not in found.message
    lost = checks.weights_check(_spec("/nonexistent/best.pt", True), paths)  # type: ignore[arg-type]
    assert lost.status is CheckStatus.FAIL and "not on this machine" in lost.message


@pytest.mark.parametrize(
    "model",
    [
        "someorg/detector",
        "hf://someorg/detector@v2/best.pt",
        "https://huggingface.co/someorg/detector/resolve/main/best.pt",
    ],
)
def test_the_preflight_leaves_a_hub_model_to_the_hub(tmp_path: Path, model: str) -> None:
    # One rule of what is a Hub model (runspec.spec.modelnames.is_hub_model) for the spec's
    # folder, the token and the preflight: a URL on the Hub's host was "not on this machine".
    spec = _spec(f"'{model}'", pretrained=True)
    paths = RunPaths.for_spec(spec, tmp_path / "state")  # type: ignore[arg-type]
    found = checks.weights_check(spec, paths)  # type: ignore[arg-type]
    assert found.status is CheckStatus.PASS, found.message
    assert "fetched from the Hub" in found.message
