"""Under an engine, the exit status after its stop signal says what the final push reached
(issue 35): dstack's SIGTERM during the final push of a run whose every weight was already
verified (each checkpoint is pushed as it is written) exited 0, "done, final push verified",
with the record, log and card never pushed; the README says 75. The run's state is made by the
real pusher into a push folder, and judged by the same calls `runspec run` makes."""

from __future__ import annotations

from pathlib import Path

from runspec.clock import SYSTEM
from runspec.engines.onbox import engine_outcome
from runspec.errors import Outcome
from runspec.machine.verdict import run_safety
from runspec.push import Pusher
from runspec.run.accept import accept
from runspec.run.finalsignals import after_stop_signal
from runspec.spec.loader import load_spec
from runspec.store.owner import RunOwner
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore, RunRecord, Termination
from runspec.timers import Timers
from tests.fixtures_run import SpecWriter
from tests.test_machine_safety import pushed, trained


def _verified(state: Path, name: str, final: bool) -> RunRecord:
    paths = StateLayout(state).run_paths(name)
    store = RecordStore(state)
    record = store.load(name)
    assert record is not None
    pusher = Pusher(
        load_spec(paths.spec_file),
        paths,
        RunOwner(store, record),
        min_interval=0.0,
        timers=Timers(SYSTEM),  # only pushed now: no push.every here
    )
    pusher.start()
    try:
        assert pusher.push_now(final=final, timeout=60) is not None
    finally:
        pusher.stop()
    again = store.load(name)
    assert again is not None
    return again


def test_a_stop_signal_during_the_final_push_never_says_done(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = tmp_path / "state"
    spec = load_spec(write_spec("graced", push={"dir": str(tmp_path / "volume")}))
    accept(spec, state)
    paths = StateLayout(state).run_paths("graced")
    trained(paths, 1)
    store = RecordStore(state)
    pushed(store, "graced", Termination.COMPLETED)  # training completed; the final push begins
    record = _verified(state, "graced", final=False)  # every weight out, pushed as written
    safety = run_safety(paths, spec, record)
    assert safety.safe, safety.why
    # The grace ran out with the final push unfinished: a fresh machine, not "done".
    assert after_stop_signal(engine_outcome(record, safety), record, True) is Outcome.RETRY
    # With no signal the run's own verdict stands, and a verified final push is done.
    assert after_stop_signal(engine_outcome(record, safety), record, False) is Outcome.OK
    record = _verified(state, "graced", final=True)
    done = engine_outcome(record, run_safety(paths, spec, record))
    assert after_stop_signal(done, record, True) is Outcome.OK
