"""The deadline planner, driven by a manual clock: nothing here sleeps."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

import runspec
from runspec.budget import (
    DEFAULT_UPLOAD_RATE,
    Planner,
    deadline_of,
    eval_interval_of,
    overrun_end,
    validates,
)
from runspec.clock import ManualClock, utc_iso
from runspec.spec.loader import load_spec_text
from runspec.store.state import RunRecord

MB = 1_000_000


def planner(clock: ManualClock, wall_clock: float = 3600.0, **kw: object) -> Planner:
    return Planner(clock.time() + wall_clock, kw.pop("fixed_reserve", None), clock, **kw)  # type: ignore[arg-type]


def test_the_next_epoch_is_predicted_from_the_longest_recent_one_of_its_kind() -> None:
    clock = ManualClock()
    p = planner(clock)
    for epoch, seconds, validated in [
        (1, 100, False),  # a slow warm-up epoch, then four of 50 s
        (2, 50, False),
        (3, 50, False),
        (4, 50, False),
        (5, 80, True),
        (6, 50, False),
        (7, 55, False),
    ]:
        p.record_epoch(epoch, seconds, validated)
    # The longest of the last five plain epochs (2, 3, 4, 6, 7): 55 s, not the mean, and the
    # warm-up (epoch 1) has aged out.
    assert p.predict_epoch(False) == 55
    assert p.predict_epoch(True) == 80


def test_an_unseen_kind_is_predicted_conservatively() -> None:
    clock = ManualClock()
    p = planner(clock)
    assert p.predict_epoch(True) is None
    p.record_epoch(1, 40, False)
    p.record_epoch(2, 60, False)
    assert p.predict_epoch(True) == pytest.approx(90)  # the longest plain one x 1.5
    q = planner(clock)
    q.record_epoch(1, 70, True)
    assert q.predict_epoch(False) == 70  # a plain epoch is no longer than a validating one


def test_fits_until_the_next_epoch_would_cross_the_reserve() -> None:
    clock = ManualClock()
    p = planner(clock, wall_clock=1000.0, fixed_reserve=100.0)
    p.record_epoch(1, 200, False)
    p.record_epoch(2, 250, True)
    clock.advance(450)  # two epochs done; 550 s left, 450 s before the reserve
    assert p.fits_another_epoch(False, pending_bytes=0)
    assert p.fits_another_epoch(True, pending_bytes=0)
    clock.advance(210)  # 240 s before the reserve: a plain epoch (200 s) fits, a validating not
    assert p.fits_another_epoch(False, pending_bytes=0)
    decision = p.decide(True, pending_bytes=0)
    assert not decision.fits
    assert "does not fit" in decision.reason and decision.predicted_epoch_s == 250
    clock.advance(60)
    assert not p.fits_another_epoch(False, pending_bytes=0)


def test_a_fixed_reserve_ignores_bytes_and_rates() -> None:
    clock = ManualClock()
    p = planner(clock, fixed_reserve=300.0)
    assert p.reserve(10**12, upload_rate=1.0) == 300.0
    assert p.point_of_no_return() == clock.time() + 3600 - 300


def test_the_auto_reserve_follows_the_measured_upload_rate() -> None:
    clock = ManualClock()
    p = planner(clock, finish_seconds=30.0, margin=10.0)
    pending = 2000 * MB  # 2 GB of checkpoints still to push
    before = p.reserve(pending)
    # Before any push: the cautious default rate.
    assert before == pytest.approx(5 + 1.25 * pending / DEFAULT_UPLOAD_RATE + 30 + 10)
    slow = p.reserve(pending, upload_rate=2 * MB)  # measured: slower than the default
    assert slow == pytest.approx(5 + 1.25 * 1000 + 30 + 10)
    assert p.reserve(pending, upload_rate=100 * MB) < before  # a faster link: a shorter one


def test_a_very_slow_link_is_taken_at_its_word() -> None:
    """A floor on the measured rate would shorten the reserve exactly when it matters most."""
    p = planner(ManualClock(), finish_seconds=30.0, margin=10.0)
    assert p.reserve(2000 * MB, upload_rate=0.1 * MB) == pytest.approx(5 + 1.25 * 20_000 + 30 + 10)


def test_a_slow_upload_stops_training_earlier() -> None:
    clock = ManualClock()
    p = planner(clock, wall_clock=3 * 3600.0, finish_seconds=30.0)
    for epoch in range(1, 4):
        p.record_epoch(epoch, 600, False)
    clock.advance(1800)
    pending = 1000 * MB
    assert p.fits_another_epoch(False, pending, upload_rate=50 * MB)  # 1 GB in 25 s
    # At 200 kB/s (floored to 0.5 MB/s) 1 GB takes ~42 min: the reserve eats the next epochs.
    assert p.reserve(pending, upload_rate=200_000) > 2500
    clock.advance(6000)  # 50 min left: a 10-minute epoch no longer fits before a ~42 min push
    assert not p.fits_another_epoch(False, pending, upload_rate=200_000)
    assert p.fits_another_epoch(False, pending, upload_rate=50 * MB)


def test_preflight_and_staging_count_against_the_budget() -> None:
    clock = ManualClock()
    record = RunRecord(name="r", spec_sha256="x")
    record.started_at = utc_iso(clock.time())
    record.deadline = utc_iso(clock.time() + 1800)
    clock.advance(900)  # preflight + staging took 15 minutes
    p = Planner(deadline_of(record), 120.0, clock)
    assert p.remaining() == pytest.approx(900)
    p.record_epoch(1, 700, False)
    assert p.fits_another_epoch(False, 0)  # 780 s before the reserve
    clock.advance(100)
    assert not p.fits_another_epoch(False, 0)


def test_a_restart_keeps_the_deadline() -> None:
    clock = ManualClock()
    record = RunRecord(name="r", spec_sha256="x")
    record.deadline = utc_iso(clock.time() + 3600)
    first = Planner(deadline_of(record), 60.0, clock)
    clock.advance(1000)
    # The process restarts: a new monotonic origin, the same persisted UTC deadline.
    restarted_clock = ManualClock(start=clock.time())
    restarted_clock._mono = 5.0  # a fresh process's monotonic clock
    second = Planner(deadline_of(record), 60.0, restarted_clock)
    assert second.remaining() == pytest.approx(first.remaining()) == pytest.approx(2600)
    assert second.stop_at() == pytest.approx(first.stop_at())


class JumpyClock(ManualClock):
    def jump_wall(self, seconds: float) -> None:
        with self._lock:
            self._wall += seconds


def test_a_wall_clock_jump_does_not_move_the_deadline_inside_a_process() -> None:
    clock = JumpyClock()
    p = planner(clock, wall_clock=3600.0, fixed_reserve=60.0)
    clock.advance(600)
    clock.jump_wall(3600)  # NTP corrects a fresh machine's clock by an hour
    assert p.remaining() == pytest.approx(3000)
    p.record_epoch(1, 100, False)
    assert p.fits_another_epoch(False, 0)


def test_stop_at_is_the_point_of_no_return() -> None:
    clock = ManualClock()
    p = planner(clock, wall_clock=7200.0, finish_seconds=30.0, margin=10.0)
    p.reserve(100 * MB, upload_rate=10 * MB)  # 5 + 12.5 + 30 + 10 = 57.5 s
    assert p.stop_at() == pytest.approx(clock.time() + 7200 - 57.5)
    assert p.point_of_no_return() == p.stop_at()


def test_validation_epochs_follow_libreyolos_rule() -> None:
    # Compare with LibreYOLO's own decision (training/trainer.py, 0-based epochs).
    from libreyolo.training.trainer import BaseTrainer

    for interval in (0, 1, 3, 10):
        for total in (1, 7, 10, 25):
            fake = SimpleNamespace(config=SimpleNamespace(eval_interval=interval, epochs=total))
            fake._is_final_epoch = lambda e, f=fake: BaseTrainer._is_final_epoch(f, e)  # type: ignore[misc]
            for epoch in range(1, total + 1):
                theirs = BaseTrainer._should_validate_epoch(fake, epoch - 1)  # type: ignore[arg-type]
                assert validates(epoch, total, interval) == theirs, (interval, total, epoch)


def test_eval_interval_from_the_spec() -> None:
    base = """\
runspec: 1
name: e
dataset: {synthetic: {}}
train: {model: yolo9-t, epochs: 5, device: cpu%s}
budget: {wall_clock: 10m}
"""
    assert eval_interval_of(load_spec_text(base % "", "a.yaml")) == 10
    assert eval_interval_of(load_spec_text(base % ", args: {eval_interval: 2}", "b.yaml")) == 2
    assert eval_interval_of(load_spec_text(base % ", args: {val: false}", "c.yaml")) == 0


def test_deadline_plus_overrun_is_one_function_every_reader_calls() -> None:
    spec = load_spec_text(
        "runspec: 1\nname: r\ndataset: {synthetic: {}}\ntrain: {model: yolo9-t, epochs: 5}\n"
        "budget: {wall_clock: 1h, overrun: 20m}\n",
        "r.yaml",
    )
    record = RunRecord(name="r", spec_sha256="x")
    with pytest.raises(ValueError, match="no deadline"):
        overrun_end(record, spec)
    clock = ManualClock()
    record.deadline = utc_iso(clock.time() + 3600)
    assert overrun_end(record, spec) == pytest.approx(clock.time() + 3600 + 1200, abs=1)
    # Nowhere else adds the overrun to a deadline (the lease, the failsafe, the end's window,
    # the provider timer and the final push's window once each added it up their own way).
    root = Path(runspec.__file__).parent
    sums = []
    for module in sorted(root.rglob("*.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
                continue
            text = ast.unparse(node)
            if ".overrun" in text and "deadline" in text:
                sums.append(f"{module.relative_to(root)}:{node.lineno}: {text}")
    assert [where.split(":")[0] for where in sums] == ["budget.py"], sums
