"""`make gpu-check` on a machine without CUDA, and the arithmetic behind its figures.

The GPU run itself needs a CUDA machine (bench/README.md); here: the script's one-line answer
without one, its make target, its nvidia-smi reading (a stand-in nvidia-smi: the only part of a
GPU that can exist here), and the figures computed from run files written by runspec's own
writers (record transitions, control files) on a manual clock.
"""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from runspec.clock import ManualClock, utc_iso
from runspec.store.state import RecordStore, RunRecord, RunStatus, Termination
from runspec.trainer import control
from runspec.trainer.control import EpochMarker, TrainerOutcome, TrainerResult

REPO = Path(__file__).resolve().parent.parent
T0 = 1_800_000_000.0


def _bench(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def test_without_cuda_it_says_so_in_one_line_and_exits_0() -> None:
    # CUDA_VISIBLE_DEVICES="" hides any GPU, so this holds on a CUDA machine too.
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "bench/gpu_check.py"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    took = time.monotonic() - started
    lines = (proc.stdout + proc.stderr).splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(lines) == 1, lines
    assert lines[0].startswith("gpu-check: no CUDA here (torch ")
    assert "torch.cuda.is_available() is False" in lines[0]
    assert took < 60  # one torch import, no dataset, no training


def test_make_gpu_check_runs_the_script_and_make_test_does_not() -> None:
    dry = subprocess.run(
        ["make", "-n", "gpu-check"], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert ".venv/bin/python bench/gpu_check.py" in dry.stdout
    tests = subprocess.run(
        ["make", "-n", "test"], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert "gpu_check" not in tests.stdout


def test_the_sampler_reads_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # nvidia-smi's own CSV for two GPUs: memory.used, memory.total (MiB), utilization.gpu (%).
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf '40960, 143771, 90\\n1024, 143771, 10\\n'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    sampler = _bench("gpu_check").GpuSampler(period=0.05)
    assert sampler.how.startswith("nvidia-smi")
    sampler.start()
    time.sleep(0.5)
    sampler.stop()
    assert sampler.peak(0, time.time()) == 40.0  # the busiest GPU, in GiB
    assert sampler.mean_util(0, time.time()) == 50.0
    assert sampler.total_gib == pytest.approx(140.4, abs=0.1)
    assert sampler.peak(0, 1) is None  # no sample in that window


def _write_run(state: Path) -> None:
    """A budget-stopped run as runspec leaves it: 12 of 100 epochs, a 120 s wall clock."""
    clock = ManualClock(T0)
    store = RecordStore(state, clock)
    record = RunRecord(name="gpu-check", spec_sha256="0" * 64, total_epochs=100)
    record.started_at, record.deadline = utc_iso(T0), utc_iso(T0 + 120)
    store.save(record)
    for after, status, term in (
        (0, RunStatus.PREFLIGHT, None),
        (10, RunStatus.STAGING, None),
        (5, RunStatus.TRAINING, None),  # T0 + 15
        (75, RunStatus.STOPPING, Termination.BUDGET),  # T0 + 90
        (5, RunStatus.PUSHING, None),
        (3, RunStatus.FINISHING, None),
        (1, RunStatus.FINISHED, None),  # T0 + 99
    ):
        clock.advance(after)
        store.transition(record, status, status.value, term)
    run_dir = state / "runs" / "gpu-check"
    run_dir.mkdir(parents=True)
    # LibreYOLO's rows: a slow first epoch, then 4 s plain and 5 s validating (every 3rd).
    rows = [
        {
            "epoch": e,
            "time": 10.0 if e == 1 else 5.0 if e % 3 == 0 else 4.0,
            "validated": e % 3 == 0,
        }
        for e in range(1, 13)
    ]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "status.json").write_text(json.dumps({"started_at": utc_iso(T0 + 25)}))
    (run_dir / "train_config.yaml").write_text("batch: 512\nimgsz: 640\namp: true\n")
    ctl = state / "jobs" / "gpu-check" / "control"
    ctl.mkdir(parents=True)
    control.write_deadline(ctl, T0 + 105, {"plain": 4.21, "validating": 5.1})
    control.write_epoch_marker(ctl, EpochMarker(12, 100, 4.0, True, T0 + 88))
    control.write_result(
        ctl,
        TrainerResult(
            outcome=TrainerOutcome.STOPPED,
            reason="budget",
            detail="stop requested (budget); stopped after epoch 12",
            epochs_completed=12,
        ),
    )
    (state / "jobs" / "gpu-check" / "runspec.log").write_text(
        f"{utc_iso(T0 + 84)} epoch 11/100  loss 3.1  budget left 36s\n"
        f"{utc_iso(T0 + 84)} budget: epoch 12 may not leave time for the final push; the "
        "trainer stops at the next boundary\n"
    )


def test_the_figures_from_a_budget_stopped_run(tmp_path: Path) -> None:
    figures = _bench("gpu_figures")
    _write_run(tmp_path)
    files = figures.RunFiles.read(tmp_path, "gpu-check")
    epochs = figures.epoch_figures(files.rows, 4096)
    assert epochs == {
        "epochs": 12,
        "first_epoch_s": 10.0,
        "plain_epoch_s": 4.0,
        "validating_epoch_s": 5.0,
        "images_per_s": 1024.0,
    }
    budget = figures.budget_figures(files, eval_interval=3)
    assert budget["termination"] == "budget"
    assert budget["wall_clock_s"] == 120
    assert budget["reserve_s"] == 15  # deadline - the trainer's stop time
    assert budget["finish_margin_s"] == 21  # finished at T0 + 99
    # The planner's decision came after epoch 11; the trainer was already in epoch 12.
    assert (budget["planned_last_epoch"], budget["trained_last_epoch"]) == (11, 12)
    # From T0 + 88: epochs 13, 14 (4 s), 15 (5 s, validating), 16 (4 s) end by T0 + 105.
    assert budget["fits_last_epoch"] == 16
    assert budget["predicted_next_epoch_s"] == {"plain": 4.21, "validating": 5.1}
    idle = figures.idle_figures(files, 3.6)
    assert idle["before_training_s"] == 15  # preflight 10 + staging 5
    assert idle["trainer_startup_s"] == 10  # training from T0 + 15, LibreYOLO from T0 + 25
    assert idle["after_training_s"] == 4  # pushing 3 + finishing 1
    assert idle["billed_s"] == 99
    assert idle["usd"] == pytest.approx(0.099)
    assert figures.training_window(files) == (T0 + 25, T0 + 88)
    shown = "\n".join(
        figures.render(
            {
                "model": "yolo9-t",
                "train_images": 4096,
                "hourly_cost": 3.6,
                "train_config": files.train_config,
                "preflight": {"wall_s": 40.0, "summary": "12 passed, 0 warned, 0 failed"},
                "epochs": epochs,
                "budget": budget,
                "idle": idle,
                "gpu": {"how": "nvidia-smi", "run_peak_gib": 60.5, "total_gib": 140.4},
            }
        )
    )
    assert "batch 512 (asked -1: AutoBatch), amp True" in shown
    assert "1024 img/s" in shown and "run 60.5 GiB of 140.4 GiB" in shown
    assert "planned 11, trained 12, would have fit 16" in shown
    assert "21.0 s before the deadline" in shown


def test_the_trainers_own_stop_is_its_planned_last_epoch(tmp_path: Path) -> None:
    figures = _bench("gpu_figures")
    _write_run(tmp_path)
    ctl = tmp_path / "jobs" / "gpu-check" / "control"
    control.write_result(
        ctl, TrainerResult(outcome=TrainerOutcome.STOPPED, reason="deadline", epochs_completed=12)
    )
    (tmp_path / "jobs" / "gpu-check" / "runspec.log").write_text("")
    budget = figures.budget_figures(figures.RunFiles.read(tmp_path, "gpu-check"), 3)
    assert (budget["planned_last_epoch"], budget["trained_last_epoch"]) == (12, 12)
