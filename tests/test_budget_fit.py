"""The schedule fitted to the budget (budget.fit), from the plan to real LibreYOLO training.

The learning-rate test trains for real (yolo9-t from scratch, CPU) twice: once with the epochs
the fit plans, once with the spec's epochs cut where a budget would stop them. What it reads
is what a user sees: metrics.jsonl's learning rate at the last trained epoch, and LibreYOLO's
own log line for its final no-augmentation phase.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import time
from pathlib import Path
from types import MappingProxyType

import pytest
import yaml

from runspec.budget import (
    DEFAULT_UPLOAD_RATE,
    FINISH_SECONDS,
    VALIDATION_FACTOR,
    auto_reserve,
    last_epoch_in_budget,
)
from runspec.budgetfit import (
    BYTES_FIGURE,
    LEFT_FIGURE,
    PROFILE_FIGURE,
    SAVE_FIGURE,
    START_FIGURE,
    TRAINER_START_S,
    Fit,
    end_reserve,
    epochs_in,
    from_figures,
    plan,
    planned_epochs,
)
from runspec.clock import human_duration, utc_iso
from runspec.preflight.profile import fit_text, seconds_left
from runspec.preflight.report import CheckResult, CheckStatus, PreflightReport
from runspec.spec.model import BudgetFit, BudgetSpec, PushSpec
from runspec.store.paths import RunPaths
from runspec.store.state import RecordStore, RunRecord, RunStatus
from runspec.trainer import control
from runspec.trainer.control import TrainerOutcome, TrainJob
from runspec.trainer.launcher import TrainerHandle, start
from runspec.trainer.observer import read_epochs
from tests.fixtures_cpu import CpuCap
from tests.fixtures_run import SpecWriter, finish_run, record_of, start_run, wait_record
from tests.fixtures_training import tiny_spec, wait_epoch, wait_for

NO_AUG = 2  # LibreYOLO's final epochs without mosaic, kept inside the fitted run


def _finish(handle: TrainerHandle) -> None:
    wait_for(lambda: not handle.alive(), 300.0, "the trainer to exit")


def _final_lr(run_dir: Path) -> float:
    """The schedule's last value as LibreYOLO plans it: lr0 x min_lr_ratio (the linear
    schedule yolo9 trains with ends there, at its last iteration)."""
    config = yaml.safe_load((run_dir / "train_config.yaml").read_text())
    assert config["scheduler"] == "linear", config["scheduler"]
    return float(config["lr0"]) * float(config["min_lr_ratio"])


def _rows(run_dir: Path) -> list[dict[str, object]]:
    """metrics.jsonl as LibreYOLO wrote it, every line."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _last_lrs(run_dir: Path) -> tuple[int, list[float]]:
    rows = read_epochs(run_dir)
    assert rows, f"no metrics.jsonl rows in {run_dir}"
    last = rows[-1]
    lrs = [float(v) for k, v in last.items() if k.startswith("lr/")]
    assert lrs, f"no learning rate in {last}"
    return int(last["epoch"]), lrs


@pytest.mark.training
@pytest.mark.timeout(600)
def test_a_fitted_schedule_reaches_its_final_learning_rate_where_a_cut_one_does_not(
    tmp_path: Path, synthetic_data_yaml: Path
) -> None:
    spec = tiny_spec("fitted", epochs=12, no_aug_epochs=NO_AUG)
    # The profile measured 600 s epochs (every one validating here), and the hour holds 5.
    fit = plan(spec, 600.0, seconds_left=3600.0)
    assert fit == Fit(epochs=5, of=12, epoch_s=600.0) and fit.fitted
    record = RunRecord(name="fitted", spec_sha256="0" * 64, fit=fit)
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    job = TrainJob.from_spec(spec, paths, synthetic_data_yaml, None, planned_epochs(spec, record))
    handle = start(job, paths)
    _finish(handle)
    result = handle.result()
    assert result is not None and result.outcome is TrainerOutcome.COMPLETED, result
    epoch, lrs = _last_lrs(paths.run_dir)
    final = _final_lr(paths.run_dir)
    assert epoch == 5
    assert lrs == pytest.approx([final] * len(lrs), rel=1e-6)
    # The last phase ran too: LibreYOLO turned mosaic off for the final epochs.
    console = (paths.run_dir / "console.log").read_text()
    assert f"for final {NO_AUG} epochs" in console

    # The same spec with its 12 epochs, stopped at an epoch boundary as the budget stops it.
    cut_spec = dataclasses.replace(spec, name="cut")
    cut_paths = RunPaths.for_spec(cut_spec, tmp_path / "state")
    cut = start(TrainJob.from_spec(cut_spec, cut_paths, synthetic_data_yaml), cut_paths)
    wait_epoch(cut_paths, 5)
    control.request_stop(cut_paths.control_dir, "budget")
    _finish(cut)
    cut_result = cut.result()
    assert cut_result is not None and cut_result.outcome is TrainerOutcome.STOPPED, cut_result
    cut_epoch, cut_lrs = _last_lrs(cut_paths.run_dir)
    assert 5 <= cut_epoch < 12
    assert min(cut_lrs) > 2 * _final_lr(cut_paths.run_dir)  # never decayed
    assert f"for final {NO_AUG} epochs" not in (cut_paths.run_dir / "console.log").read_text()


def test_the_fit_plans_the_epochs_that_end_before_the_reserve() -> None:
    spec = tiny_spec("plan", epochs=100)
    spec = dataclasses.replace(
        spec,
        train=dataclasses.replace(spec.train, args=MappingProxyType({"eval_interval": 10})),
        budget=BudgetSpec(wall_clock=3600.0, reserve=600.0),
    )
    # 3600 - 600 reserve - 30 s start = 2970 s; 60 s epochs planned 1 % longer, every tenth
    # validating (1.1 x): 48 of them.
    assert epochs_in(spec, 60.0, 3600.0) == 48
    assert plan(spec, 60.0, 3600.0) == Fit(epochs=48, of=100, epoch_s=60.0)
    # Time already spent (preflight, staging) counts: half the hour left holds fewer.
    left = plan(spec, 60.0, 1800.0)
    assert left is not None and left.epochs < 48
    # All fit: the spec's count, nothing fitted (no line says otherwise).
    small = plan(spec, 1.0, 3600.0)
    assert small is not None and small.epochs == 100 and not small.fitted
    assert small.line() == "all 100 epochs fit in the budget"
    # fit: none keeps the spec's epochs; no profile figure, or not one epoch fitting: nothing.
    none = dataclasses.replace(spec, budget=dataclasses.replace(spec.budget, fit=BudgetFit.NONE))
    assert plan(none, 60.0, 3600.0) is None
    assert plan(spec, None, 3600.0) is None
    assert plan(spec, 4000.0, 3600.0) is None


def test_the_fit_travels_from_the_profile_check_through_the_report_and_the_record() -> None:
    check = CheckResult("profile", CheckStatus.WARN, "m", "f", figures={"epoch_seconds": 12.5})
    report = PreflightReport.from_json(PreflightReport("dataset", [check]).to_json())
    assert report.figure("epoch_seconds") == 12.5
    assert (
        PreflightReport("dataset", [CheckResult("x", CheckStatus.PASS, "m")]).figure(
            "epoch_seconds"
        )
        is None
    )
    spec = tiny_spec("rec", epochs=12)
    record = RunRecord(name="rec", spec_sha256="0" * 64)
    assert planned_epochs(spec, record) == 12
    record.fit = Fit(epochs=5, of=12, epoch_s=600.0)
    again = RunRecord.from_json(record.to_json())
    assert planned_epochs(spec, again) == 5
    # A fit that is no fit is a damaged record, as any other field of the wrong shape.
    with pytest.raises(TypeError, match="fit"):
        RunRecord.from_json({**record.to_json(), "fit": {"epochs": "many"}})


@pytest.mark.training
@pytest.mark.timeout(600)
def test_a_run_whose_budget_cannot_hold_its_epochs_is_given_the_fitted_schedule(
    tmp_path: Path, write_spec: SpecWriter, cpu_cap: CpuCap
) -> None:
    spec = write_spec(
        "squeezed",
        epochs=400,  # far more than two minutes hold on this CPU
        # save_period: the disk check counts an epoch file per epoch of the 400, not the fit's
        train={"save_period": 400, "args": {"patience": 0, "no_aug_epochs": NO_AUG}},
        preflight={"profile": True},
        push={"dir": str(tmp_path / "volume")},
        budget={"wall_clock": "90s", "reserve": "20s"},
    )
    state = tmp_path / "state"
    proc = start_run(spec, state)
    # The fit comes from the profile, before training. Once training is under way the trainer
    # goes on at a far slower machine's pace (a twentieth of a core; the run's driver, who
    # stops it and pushes, at full speed): what counts is that the fitted count is the one
    # trained to (the budget's stop guards the rest); at full speed it burned a core for its
    # budget.
    wait_record(
        state, "squeezed", lambda r: r.get("epoch", 0) >= 1 or r["status"] == "finished", 300
    )
    trainer = state / "jobs" / "squeezed" / "trainer.json"
    with contextlib.suppress(OSError):  # the run ended already: nothing left to slow down
        cpu_cap.hold(int(json.loads(trainer.read_text())["identity"]["pid"]))
    cpu_cap.limit(0.05)
    code, out = finish_run(proc, timeout=400)
    assert code == 0, out
    record = record_of(state, "squeezed")
    fit = Fit.from_json(record["fit"])
    assert fit is not None and 1 <= fit.epochs < 400, out
    # Said before training: the count and that the schedule is fitted to it.
    said = f"your 400 epochs do not fit: training {fit.epochs}, the schedule fitted to them"
    assert f"budget: {said}" in out
    # One number: the profile's line, the run's and the summary's (the profile's once said
    # the count for the whole wall clock, the run's for what was left of it).
    counts = re.findall(r"training (\d+), the schedule fitted", out)
    assert len(counts) >= 3 and set(counts) == {str(fit.epochs)}, out
    assert "left of the 1m30s wall clock" in out
    assert f"yolo9-t, {fit.epochs} epochs (fitted to the budget)" in out
    # LibreYOLO was given the fitted count: its epoch events plan that many. (Whether this
    # CPU run then ends the schedule depends on how far the profile's steps-only estimate
    # falls short of epochs that validate and save three checkpoints each: the budget's stop
    # guards it; the learning rate's end is the trainer-level test above.)
    assert record["total_epochs"] == fit.epochs
    assert record["termination"] in ("completed", "budget"), out
    run_dir = state / "runs" / "squeezed"
    marker = control.read_epoch_marker(state / "jobs" / "squeezed" / "control")
    assert marker is not None and marker.total_epochs == fit.epochs
    assert _rows(run_dir) and record["epoch"] <= fit.epochs
    # The model card and the summary say so; the summary adds the time to the first step.
    card = (tmp_path / "volume" / "squeezed" / "README.md").read_text()
    assert f"| schedule | {said} (budget.fit) |" in card
    assert f"schedule: {said}" in out
    assert "first training step " in out and " after arrival" in out


def test_the_fitted_last_epoch_is_one_the_budgets_stop_lets_run() -> None:
    # A short budget: the fitted run's last epoch is its first validating one, which the
    # trainer's stop rule predicts at 1.5 x the plain epochs it has seen (runspec.budget).
    spec = tiny_spec("short", epochs=100)
    spec = dataclasses.replace(
        spec,
        train=dataclasses.replace(spec.train, args=MappingProxyType({"eval_interval": 10})),
        budget=BudgetSpec(wall_clock=3600.0, reserve=170.0),
    )
    fit = plan(spec, 540.0, 3600.0)
    assert fit is not None and fit.epochs < 10
    usable = 3600.0 - TRAINER_START_S - 170.0

    def predict(validating: bool) -> float:
        return 540.0 * (VALIDATION_FACTOR if validating else 1.0)

    # Epochs as long as the profile said, judged by the stop's own rule, reach the fit's last.
    reached = last_epoch_in_budget(usable, 0.0, 0, fit.epochs, 10, predict)
    assert reached == fit.epochs


def test_a_fit_counting_the_checkpoint_saves_and_the_final_push_is_one_the_stop_lets_end() -> None:
    # Sub-second epochs beside checkpoint saves of a fifth of a second: LibreYOLO saves last.pt
    # after every epoch, best.pt after a validation, epoch_N.pt each save_period (here every
    # epoch), and the trainer's stop times an epoch from one end to the next, saves included.
    # No fixed reserve: the stop keeps the final push of last.pt and best.pt in hand.
    spec = tiny_spec("saves", epochs=1000, eval_interval=10)
    volume = PushSpec(dir=Path("/mnt/volume"))
    spec = dataclasses.replace(spec, budget=BudgetSpec(wall_clock=120.0), push=volume)
    steps, save, size = 0.5, 0.2, 35_000_000
    reserve = auto_reserve(2 * size, DEFAULT_UPLOAD_RATE, FINISH_SECONDS[spec.finish.action])
    stop_at = 120.0 - TRAINER_START_S - reserve  # from the trainer's start

    def predict(validating: bool) -> float:  # as the stop measures them, epoch_N.pt included
        return steps * (1.1 if validating else 1.0) + save * (3 if validating else 2)

    fit = plan(spec, steps, 120.0, save, size)
    assert fit is not None and fit.fitted and fit.save_s == save
    assert last_epoch_in_budget(stop_at, 0.0, 0, fit.epochs, 10, predict) == fit.epochs
    # The fit of the steps alone (today's before this) plans epochs the stop then cuts.
    steps_only = plan(spec, steps, 120.0)
    assert steps_only is not None and steps_only.epochs > fit.epochs
    assert last_epoch_in_budget(stop_at, 0.0, 0, steps_only.epochs, 10, predict) < (
        steps_only.epochs
    )
    # A run that pushes nowhere keeps no time for a push.
    nowhere = dataclasses.replace(spec, push=None)
    assert end_reserve(nowhere, size) == end_reserve(nowhere) < end_reserve(spec, size)
    assert Fit.from_json(fit.to_json()) == fit
    assert Fit.from_json({"epochs": 5, "of": 9, "epoch_s": 1.0}) == Fit(5, 9, 1.0)  # older


def test_the_profile_and_the_run_say_one_count_for_the_budget_that_is_left(
    tmp_path: Path,
) -> None:
    # The profile said "training 38" for the whole wall clock and the run, one line later,
    # "training 32" for what the preflight and staging had left of it.
    spec = tiny_spec("left", epochs=100, eval_interval=10)
    spec = dataclasses.replace(spec, budget=BudgetSpec(wall_clock=3600.0, reserve=600.0))
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    assert seconds_left(spec, paths) == 3600.0  # `runspec preflight` before any run
    record = RunRecord(name="left", spec_sha256="0" * 64, status=RunStatus.STAGING)
    record.deadline = utc_iso(time.time() + 1800.0)
    RecordStore(paths.state).save(record)
    left = seconds_left(spec, paths)
    assert 1790.0 < left <= 1800.0
    figures = {PROFILE_FIGURE: 60.0, SAVE_FIGURE: 0.5, BYTES_FIGURE: 1e6, LEFT_FIGURE: left}
    figures[START_FIGURE] = 12.0  # the profile child's own start, measured
    said, all_fit = fit_text(spec, figures)
    # The run plans a moment later, from the profile's figures: the count it said.
    fit = from_figures(spec, figures.get, left - 3.0)
    assert fit is not None and not all_fit
    assert said == f"{fit.line()} ({human_duration(left)} left of the 1h00m wall clock)"
    assert fit == plan(spec, 60.0, left, 0.5, 1_000_000, 12.0) and fit.epochs < 48
    # A run that ended long ago (its name reused by `runspec preflight`): the whole wall clock.
    record.status = RunStatus.FINISHED
    RecordStore(paths.state).save(record)
    assert seconds_left(spec, paths) == 3600.0
