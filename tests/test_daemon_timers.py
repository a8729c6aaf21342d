"""The daemon's timed jobs: one APScheduler in memory, run by the loop, on a clock the tests
move (nothing here sleeps); the idle finish re-armed at start from the records alone."""

from __future__ import annotations

from pathlib import Path

from runspec.clock import ManualClock, utc_iso
from runspec.daemon.config import DaemonConfig
from runspec.daemon.runs import RunKeeper
from runspec.run.accept import accept
from runspec.spec.loader import load_spec_text
from runspec.spec.model import FinishAction, FinishSpec
from runspec.store.state import RecordStore, RunStatus, Termination
from runspec.timers import IDLE_FINISH_ID, Timers
from tests.fixtures_daemon import spec_text

IDLE = 600.0


def test_a_recurring_job_runs_each_interval_and_once_for_many_missed() -> None:
    clock = ManualClock()
    timers = Timers(clock)
    ran: list[float] = []
    timers.every("tick", 30.0, lambda: ran.append(clock.time()))
    assert timers.next_in() == 30.0
    clock.advance(29.0)
    assert timers.run_due() == 0 and ran == []
    clock.advance(1.0)
    assert timers.run_due() == 1 and len(ran) == 1
    clock.advance(3600.0)  # a suspended machine: 120 runs missed, one run now
    assert timers.run_due() == 1 and len(ran) == 2
    assert timers.next_in() is not None and 0 < timers.next_in() <= 30.0  # type: ignore[operator]
    timers.close()


def test_a_dated_job_runs_once_even_when_its_time_passed_unseen_and_cancel_stops_it() -> None:
    clock = ManualClock()
    timers = Timers(clock)
    ran: list[str] = []
    timers.at("once", clock.time() - 5.0, lambda: ran.append("once"))
    timers.at("never", clock.time() + 5.0, lambda: ran.append("never"))
    timers.cancel("never")
    timers.cancel("not-armed")  # nothing to cancel: no error
    assert timers.run_due() == 1 and ran == ["once"]
    clock.advance(10.0)
    assert timers.run_due() == 0 and ran == ["once"]
    assert not timers.armed("once") and timers.next_in() is None
    timers.close()


def test_a_failing_job_leaves_the_others_running() -> None:
    clock = ManualClock()
    timers = Timers(clock)
    ran: list[str] = []

    def broken() -> None:
        raise OSError(28, "No space left on device")

    timers.every("broken", 1.0, broken)
    timers.every("fine", 1.0, lambda: ran.append("fine"))
    clock.advance(1.0)
    assert timers.run_due() == 2 and ran == ["fine"]
    clock.advance(1.0)
    assert timers.run_due() == 2 and ran == ["fine", "fine"]  # still armed, both
    timers.close()


def _keeper(tmp_path: Path, clock: ManualClock, marker: Path) -> tuple[RunKeeper, list[str]]:
    state = tmp_path / "state"
    state.mkdir(mode=0o700, exist_ok=True)
    cfg = DaemonConfig(
        state=state,
        inbox=state / "inbox",
        data=state / "data",
        runs=state / "runs",
        finish=FinishSpec(action=FinishAction.COMMAND, command=("/usr/bin/touch", str(marker))),
        idle_finish=IDLE,
    )
    said: list[str] = []
    keeper = RunKeeper(cfg, RecordStore(state, clock), clock, said.append, once=False)
    keeper.timers = Timers(clock)
    return keeper, said


def _ended_run(keeper: RunKeeper, clock: ManualClock, name: str, ended: float | None) -> None:
    spec = load_spec_text(spec_text(name), f"{name}.yaml")
    record = accept(spec, keeper.cfg.state, None, clock)
    if ended is not None:
        keeper.store.transition(record, RunStatus.FINISHED, "cancelled", Termination.CANCELLED)
        record.ended_at = utc_iso(ended)
        keeper.store.save(record)


def test_the_idle_finish_is_re_armed_at_start_from_the_last_runs_end(tmp_path: Path) -> None:
    clock = ManualClock()
    marker = tmp_path / "machine-ended"
    keeper, said = _keeper(tmp_path, clock, marker)
    ended = clock.time()
    _ended_run(keeper, clock, "early", ended - 100.0)
    _ended_run(keeper, clock, "last", ended)
    clock.advance(200.0)  # the daemon was down for a while, then starts again
    keeper.rearm_idle_finish()
    assert keeper.timers is not None
    assert keeper.timers.due_at(IDLE_FINISH_ID) == ended + IDLE
    assert "machine: idle finish armed: command in 6m40s" in said
    clock.advance(IDLE - 200.0 - 1.0)
    assert keeper.timers.run_due() == 0 and not marker.exists()
    clock.advance(1.0)
    assert keeper.timers.run_due() == 1
    assert keeper._endgame_thread is not None
    keeper._endgame_thread.join(timeout=60)
    assert marker.exists(), said
    assert any("applying the idle finish (command)" in line for line in said)


def test_no_idle_finish_on_a_fresh_machine_nor_while_a_run_is_queued(tmp_path: Path) -> None:
    clock = ManualClock()
    marker = tmp_path / "machine-ended"
    keeper, _ = _keeper(tmp_path, clock, marker)
    assert keeper.timers is not None
    keeper.rearm_idle_finish()
    assert not keeper.timers.armed(IDLE_FINISH_ID)  # nothing ever ran
    _ended_run(keeper, clock, "done", clock.time())
    _ended_run(keeper, clock, "waiting", None)
    keeper.rearm_idle_finish()
    assert not keeper.timers.armed(IDLE_FINISH_ID)  # a queued run: the machine is not idle
    clock.advance(10 * IDLE)
    assert keeper.timers.run_due() == 0 and not marker.exists()
