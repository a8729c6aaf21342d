"""The observer on run folders shaped as LibreYOLO 1.6.0 writes them (see notes/libreyolo.md):
the cases that are slow or awkward to reach with real training. Real runs are observed in
test_trainer.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runspec.trainer.observer import observe


def _status(run: Path, state: str, **extra: Any) -> None:
    run.mkdir(parents=True, exist_ok=True)
    data = {"state": state, "current_epoch": 0, "total_epochs": 20, "pid": 12345, **extra}
    (run / "status.json").write_text(json.dumps(data))


def _metrics(run: Path, epochs: list[int], seconds: float = 2.0) -> None:
    lines = [
        json.dumps(
            {
                "epoch": e,
                "time": seconds,
                "train/loss": 1.0 / (e + i),  # later lines for the same epoch differ
                "best_metric": 0.1 * e,
                "best_metric_name": "metrics/mAP50-95",
            }
        )
        for i, e in enumerate(epochs)
    ]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def test_metrics_after_a_resume_are_deduplicated_last_row_wins(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _status(run, "running", current_epoch=20)
    # Killed at 19, resumed from epoch_15: LibreYOLO appends 16..20 without trimming.
    epochs = [*range(1, 20), 16, 17, 18, 19, 20]
    _metrics(run, epochs)
    seen = observe(run, tmp_path / "control")
    assert [row["epoch"] for row in seen.epochs] == list(range(1, 21))
    assert seen.epochs[15]["train/loss"] == pytest.approx(1.0 / (16 + 19))  # the resumed row
    assert (seen.completed_epochs, seen.total_epochs) == (20, 20)
    assert seen.eta_seconds == 0.0


def test_progress_eta_and_best_metric(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _status(run, "running", current_epoch=7)
    _metrics(run, [1, 2, 3, 4, 5, 6, 7], seconds=3.0)
    seen = observe(run, tmp_path / "control")
    assert seen.completed_epochs == 7
    assert seen.eta_seconds == pytest.approx(13 * 3.0)
    assert seen.best_metric == pytest.approx(0.7)


def test_nothing_written_yet(tmp_path: Path) -> None:
    run = tmp_path / "run"
    starting = observe(run, tmp_path / "control")
    assert starting.completed_epochs == 0 and starting.eta_seconds is None
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"epoch": 1, "time": 1.0}\n{"epoch": 2, "ti')  # torn line
    assert [r["epoch"] for r in observe(run, tmp_path / "control").epochs] == [1]
