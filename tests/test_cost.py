"""The cost arithmetic against the guide's numbers, auto's choice, and `runspec cost`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runspec.cost import Choice, break_even_hours, choose, estimate, run_cost, stopped_hourly
from runspec.spec.loader import load_spec, load_spec_text
from runspec.spec.model import StorageSpec
from runspec.store.state import HistoryEntry, RunRecord, RunStatus

REPO = Path(__file__).resolve().parent.parent
GUIDE = StorageSpec(
    allocated_gb=250, usd_per_gb_month=0.20, rebuild_usd=1.00, return_within=8 * 3600
)


def test_the_guides_machine() -> None:
    # rented-gpu-guide.md: 250 GB at $0.20/GB-month -> $0.0685/h; break-even about 14.6 h.
    assert round(stopped_hourly(GUIDE), 4) == 0.0685
    assert round(break_even_hours(GUIDE), 1) == 14.6


@pytest.mark.parametrize(
    ("hours", "expected"),
    [
        (1, Choice.STOP),
        (8, Choice.STOP),
        (14.5, Choice.STOP),
        (14.7, Choice.DESTROY),
        (48, Choice.DESTROY),
    ],
)
def test_auto_chooses_by_the_break_even(hours: float, expected: Choice) -> None:
    storage = StorageSpec(250, 0.20, 1.00, hours * 3600)
    choice, why = choose(storage, "vast")
    assert choice is expected
    assert "break-even 14.6 h" in why


@pytest.mark.parametrize("provider", ["hetzner", "lambda"])
def test_auto_never_stops_where_a_stop_saves_nothing(provider: str) -> None:
    choice, why = choose(StorageSpec(250, 0.20, 1.00, 3600), provider)
    assert choice is Choice.DESTROY
    assert ("bills in full" if provider == "hetzner" else "cannot be stopped") in why


SPEC = """\
runspec: 1
name: costly
dataset: {synthetic: {}}
train: {model: yolo9-t, epochs: 3, device: cpu}
push: {dir: /tmp/pushed}
budget: {wall_clock: 6h, overrun: 20m, hourly_cost: 3.4828}
finish:
  action: auto
  provider: vast
  storage: {allocated_gb: 250, usd_per_gb_month: 0.20, rebuild_usd: 1.00, return_within: 8h}
"""


def test_estimate_for_the_guides_machine() -> None:
    est = estimate(load_spec_text(SPEC, "costly.yaml"))
    assert est.worst_case_usd == pytest.approx(3.4828 * (6 + 20 / 60))
    assert est.stopped_hourly == pytest.approx(250 * 0.20 / 730)
    assert est.stop_cost_usd == pytest.approx(8 * 250 * 0.20 / 730)
    assert est.advice == "stop"
    data = est.to_json()
    assert data["break_even_hours"] == pytest.approx(14.6, abs=0.05)


def test_run_cost_counts_billed_time_and_gpu_idle_seconds() -> None:
    t = "2026-11-30T01:{:02d}:{:02d}+00:00"
    record = RunRecord(
        name="r",
        spec_sha256="x",
        status=RunStatus.FINISHED,
        started_at=t.format(0, 0),
        ended_at=t.format(50, 0),
        history=[
            HistoryEntry(t.format(0, 0), "queued", "preflight", ""),
            HistoryEntry(t.format(1, 0), "preflight", "staging", ""),
            HistoryEntry(t.format(3, 0), "staging", "training", ""),
            HistoryEntry(t.format(45, 0), "training", "stopping", ""),
            HistoryEntry(t.format(46, 0), "stopping", "pushing", ""),
            HistoryEntry(t.format(49, 30), "pushing", "finishing", ""),
            HistoryEntry(t.format(50, 0), "finishing", "finished", ""),
        ],
    )
    cost = run_cost(record, hourly_cost=3.60, now=0.0)
    assert cost.billed_s == 50 * 60
    assert cost.usd == pytest.approx(3.00)
    # preflight 60 s + staging 120 s + final push 210 s + finish 30 s
    assert cost.idle_by_status == {"preflight": 60, "staging": 120, "pushing": 210, "finishing": 30}
    assert cost.gpu_idle_s == 420


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runspec", "cost", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cost_command_text_and_json(tmp_path: Path) -> None:
    spec = tmp_path / "costly.yaml"
    spec.write_text(SPEC)
    text = run_cli(str(spec))
    assert text.returncode == 0, text.stderr
    assert "$0.0685/h" in text.stdout and "break-even:   14.6 h" in text.stdout
    assert "worst case:   $22.06" in text.stdout
    assert "advice:       stop:" in text.stdout

    js = run_cli(str(spec), "--format", "json")
    assert js.returncode == 0, js.stderr
    data = json.loads(js.stdout)
    assert data["advice"] == "stop" and data["running_hourly"] == 3.4828


def test_cost_command_on_the_example_spec_and_a_bad_one(tmp_path: Path) -> None:
    example = REPO / "specs" / "long-run-auto.yaml"
    est = estimate(load_spec(example))
    result = run_cli(str(example), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["advice"] == est.advice == "stop"  # back within 12 h

    bad = tmp_path / "bad.yaml"
    bad.write_text("runspec: 1\nname: x\n")
    failed = run_cli(str(bad))
    assert failed.returncode == 2
    assert "bad.yaml" in failed.stderr
