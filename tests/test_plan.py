"""`runspec plan`: a spec's worst-case bill at its provider's billing increment, the epochs that
fit, the finish, and its problems, for a pull request, in text, JSON and markdown."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runspec.billing import INCREMENTS, bill
from runspec.budgetfit import epochs_in
from runspec.spec.loader import load_spec
from tests.fixtures_daemon import runspec_cli

SPEC = """\
runspec: 1
name: {name}
dataset:
  synthetic: {{}}
train:
  model: yolo9-t
  epochs: 40
budget:
  wall_clock: {wall}
  overrun: 5m
  hourly_cost: 2.0
finish:
  action: stop
  provider: {provider}
"""
BROKEN = """\
runspec: 1
name: broken
dataset:
  synthetic: {}
train:
  model: yolo9-t
  epohcs: 3
budget:
  wall_clock: 1h
"""


def _write(folder: Path, name: str, wall: str = "3h10m", provider: str = "vast") -> Path:
    path = folder / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SPEC.format(name=name, wall=wall, provider=provider))
    return path


@pytest.mark.parametrize(
    ("provider", "used", "billed"),
    [
        ("aws", 30, 60),  # per second after a one-minute minimum
        ("aws", 61.2, 62),
        ("gcp", 59, 60),
        ("gcp", 3601.5, 3602),
        ("vast", 30.2, 31),  # per second
        ("runpod", 30.2, 31),
        ("lambda", 61, 120),  # per minute
        ("hf-jobs", 61, 120),
        ("hf-jobs", 120, 120),
        ("hetzner", 3601, 7200),  # per started hour
        ("hetzner", 60, 3600),
    ],
)
def test_each_provider_bills_at_its_own_increment(
    provider: str, used: float, billed: float
) -> None:
    assert INCREMENTS[provider].billed_seconds(used) == billed
    assert bill(provider, used, 0, 3600.0).usd == pytest.approx(billed)  # $1 a second


def test_a_coarse_increment_says_what_the_wasted_time_would_train() -> None:
    """3h10m on Hetzner (plus a 5m overrun) bills 4 h: a 3h55m wall clock costs the same."""
    hetzner = bill("hetzner", 3 * 3600 + 600, 300, 1.0)
    assert hetzner.billed_s == 4 * 3600
    assert hetzner.better_wall_clock_s == 3 * 3600 + 55 * 60
    assert hetzner.advice(3 * 3600 + 600) == (
        "3h10m on hetzner bills 4h00m: a wall clock of 3h55m trains 45m00s more for the same money"
    )
    # Per second, nothing is wasted and nothing is said.
    assert bill("vast", 3 * 3600 + 600, 300, 1.0).advice(3 * 3600 + 600) is None


def test_plan_text_for_valid_and_invalid_specs(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    _write(specs, "good", provider="hetzner")
    (specs / "broken.yaml").write_text(BROKEN)
    out = runspec_cli("plan", str(specs), "--epoch-time", "6m")
    assert out.returncode == 1, out.stdout + out.stderr  # one invalid spec
    assert f"{specs / 'broken.yaml'}:7:3: /train/epohcs: unknown key 'epohcs'" in out.stdout
    assert f"{specs / 'good.yaml'}: good: valid" in out.stdout
    assert "worst case: $8.00 on hetzner (3h15m billed as 4h00m per started hour" in out.stdout
    assert "a wall clock of 3h55m trains 45m00s more for the same money" in out.stdout
    fit = epochs_in(load_spec(specs / "good.yaml"), 360.0, 3 * 3600 + 600)
    assert 0 < fit < 40 and f"about {fit} of your 40 epochs fit at 6m00s an epoch" in out.stdout
    # Hetzner cannot stop: the finish says what will really happen.
    assert "stops the instance through hetzner" in out.stdout


def test_plan_json_is_an_object_per_spec(tmp_path: Path) -> None:
    good = _write(tmp_path, "good", wall="2h", provider="lambda")
    broken = tmp_path / "broken.yaml"
    broken.write_text(BROKEN)
    out = runspec_cli("plan", str(good), str(broken), "--json")
    assert out.returncode == 1, out.stderr
    first, second = json.loads(out.stdout)
    assert first["file"] == str(good) and first["valid"] is True and first["problems"] == []
    assert first["worst_case_cost"]["provider"] == "lambda"
    assert first["worst_case_cost"]["billed_seconds"] == 2 * 3600 + 300
    assert first["worst_case_cost"]["usd"] == pytest.approx(2.0 * (2 * 3600 + 300) / 3600, 1e-4)
    assert first["finish"] == {
        "action": "stop",
        "provider": "lambda",
        "unverified": "left running (lambda cannot stop an instance)",
        "words": "stops the instance through lambda (its disk kept) after the final push",
    }
    assert second["valid"] is False
    assert (7, 3) in [(p["line"], p["column"]) for p in second["problems"]]
    everything_ok = runspec_cli("plan", str(good), "--json")
    assert everything_ok.returncode == 0


def test_plan_markdown_is_a_comment_a_hostile_file_name_cannot_break(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    _write(specs, "good", provider="aws")
    hostile = specs / "x|<img src=y>`.yaml"
    hostile.write_text(BROKEN)
    out = runspec_cli("plan", str(specs), "--format", "markdown")
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "### runspec plan: 1 of 2 invalid"
    rows = [line for line in lines if line.startswith("| ")]
    assert len(rows) == 3  # the header and one row per spec
    cells = [re.split(r"(?<!\\)\|", row) for row in rows]
    assert all(len(c) == 7 for c in cells), rows  # no cell split by a file name
    assert re.search(r"(?<!\\)[<>`]", out.stdout) is None  # no tag, no code span opened
    assert "\\<img src=y\\>" in out.stdout
    assert "| yes | $6.50 on aws (3h15m billed per second after a 1m00s minimum" in out.stdout


def test_plan_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    out = runspec_cli("plan", str(tmp_path / "nothing-here"))
    assert out.returncode == 2
    assert "no such file or folder" in out.stdout
    bad = runspec_cli("plan", str(_write(tmp_path, "good")), "--epoch-time", "90")
    assert bad.returncode == 2 and "--epoch-time" in bad.stderr


def test_plan_takes_the_epoch_time_earlier_runs_measured_from_their_receipts(
    tmp_path: Path, hub_server: Any, hub_env: dict[str, str]
) -> None:
    """`--hub ORG`: the median epoch of the org's finished runs of the same model, image size
    and batch (their receipts); another model's, and what no runspec wrote, count for nothing."""
    card = b"---\ntags:\n- runspec\n---\n"

    def finished(repo: str, training: object) -> None:
        hub_server.put_file(repo, "README.md", card, repo_type="model")
        receipt = json.dumps({"schema": 1, "training": training}).encode()
        hub_server.put_file(repo, "runspec/receipt.json", receipt, repo_type="model")

    same = {"model": "yolo9-t", "imgsz": 640, "batch": 16, "gpu": "NVIDIA H100 80GB HBM3"}
    finished("me/a", {**same, "epoch_seconds": 100.0})
    finished("me/b", {**same, "epoch_seconds": 200.0})
    finished("me/c", {**same, "model": "yolo9-s", "epoch_seconds": 999.0})
    finished("me/d", {**same, "epoch_seconds": "fast"})
    spec = _write(tmp_path, "good", wall="2h", provider="vast")
    out = subprocess.run(
        [sys.executable, "-m", "runspec", "plan", str(spec), "--hub", "me", "--json"],
        env={**os.environ, **hub_env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (entry,) = json.loads(out.stdout)
    epochs = entry["epochs"]
    assert epochs["epoch_seconds"] == 150.0
    assert epochs["from"].startswith("the median of 2 earlier runs at the Hub")
    assert epochs["fit"] == epochs_in(load_spec(spec), 150.0, 2 * 3600)
