"""`runspec cancel` says what will happen (issue 35): after training it turns the finish into
"keep" while the end is undecided, and once the end is decided it refuses (exit 2) and says
what will happen instead. Never "the machine is kept" said and the machine ended anyway.

The provider is a local stand-in for vast.ai's API (a destroy cannot be tested against the real
thing; its routes answer as vast's /api/v0/instances/{id}/ does, see tests/fixtures_providers.py).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from runspec.machine.endgame import Endgame
from runspec.run.accept import accept
from runspec.run.lifecycle import Lifecycle, LifecycleOptions
from runspec.spec.loader import load_spec
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore, RunStatus, Termination
from tests.fixtures_providers import StandIn, vast_answers_stopped
from tests.fixtures_run import RUNSPEC, SpecWriter, finish_run, record_of, start_run, wait_record
from tests.hubserver import HubServer
from tests.test_machine_safety import pushed, trained

VAST = {"CONTAINER_ID": "4242", "CONTAINER_API_KEY": "vast-key-cancel-test"}
DESTROY = {"action": "destroy", "provider": "vast", "unverified": "stop"}


def _cancel(state: Path, name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNSPEC, "cancel", name, "--state", str(state)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _wait_log(state: Path, name: str, text: str, after: str, timeout: float) -> None:
    log = state / "jobs" / name / "runspec.log"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        said = log.read_text() if log.exists() else ""
        if after in said and text in said[said.index(after) :]:
            return
        time.sleep(0.2)
    pytest.fail(f"{text!r} after {after!r} not in {log} within {timeout} s")


@pytest.mark.training
def test_a_cancel_during_the_final_push_keeps_the_machine_as_it_says(
    tmp_path: Path,
    write_spec: SpecWriter,
    hub_server: HubServer,
    hub_env: dict[str, str],
    standin: StandIn,
    provider_env: dict[str, str],
) -> None:
    vast_answers_stopped(standin)
    spec = write_spec(
        "latecancel", epochs=1, push={"hub": {"repo": "me/latecancel"}, "every": "1h"},
        finish=DESTROY,
    )  # fmt: skip
    state = tmp_path / "state"
    hub_server.fail("commit", "500", times=100_000)  # the final push retries until cleared
    proc = start_run(spec, state, {**hub_env, **provider_env, **VAST})
    try:
        wait_record(state, "latecancel", lambda r: r["status"] == "pushing", timeout=300)
        _wait_log(state, "latecancel", "retrying in", after="final push (at most", timeout=120)
        cancel = _cancel(state, "latecancel")
        hub_server.clear_faults()  # the Hub is back: the final push verifies
        code, out = finish_run(proc, timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert cancel.returncode == 0, cancel.stderr
    assert "the machine is kept" in cancel.stdout, cancel.stdout
    assert "final push" in cancel.stdout  # said for the phase it is in, not an epoch boundary
    assert code == 0, out[-4000:]
    # Said and done: the final push verified, and no request ever went to the provider.
    assert standin.made("DELETE") == [] and standin.made("PUT") == [], out[-4000:]
    record = record_of(state, "latecancel")
    assert record["status"] == "finished" and record["last_push"]["final"] is True
    assert "cancelled" in record["reason"], record["reason"]
    assert not record["finish"], record["finish"]
    assert "cancel requested after training: no finish action follows the push" in out
    # Once it has ended, a cancel says so and changes nothing.
    again = _cancel(state, "latecancel")
    assert again.returncode == 2 and "already finished" in again.stderr, again.stderr


def _at_finishing(tmp_path: Path, write_spec: SpecWriter, name: str) -> Path:
    """A run whose final push is done and whose end was decided (moved to finishing)."""
    state = tmp_path / "state"
    spec = load_spec(write_spec(name, finish=DESTROY, push={"dir": str(tmp_path / "volume")}))
    accept(spec, state)
    trained(StateLayout(state).run_paths(name), 1)
    store = RecordStore(state)
    record = pushed(store, name, Termination.COMPLETED)
    store.transition(record, RunStatus.FINISHING, "completed; applying the finish action")
    return state


def test_a_cancel_once_the_end_is_decided_is_refused_and_says_what_happens(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = _at_finishing(tmp_path, write_spec, "decided")
    paths = StateLayout(state).run_paths("decided")
    refused = _cancel(state, "decided")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "its finish is decided" in refused.stderr, refused.stderr
    assert "cannot keep the machine" in refused.stderr
    assert "the machine is kept" not in refused.stdout + refused.stderr
    assert not paths.cancel_file.exists()  # nothing asked that nobody will do
    # Finished, its destroy armed for the machine and waiting for another run: still refused.
    store = RecordStore(state)
    record = store.load("decided")
    assert record is not None
    store.transition(record, RunStatus.FINISHED, "finish deferred to the machine's end")
    spec = load_spec(paths.spec_file)
    Endgame(StateLayout(state), say=print).arm(
        "decided", spec.finish, hourly_cost=None, weights=str(paths.run_dir), why="test"
    )
    deferred = _cancel(state, "decided")
    assert deferred.returncode == 2, deferred.stdout + deferred.stderr
    assert "destroy" in deferred.stderr and "is armed for the machine" in deferred.stderr


def test_a_cancel_left_before_the_finish_began_is_still_honoured(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    """A move to finishing that reached the record on disk late (a full disk): a cancel the
    command accepted meanwhile still keeps the machine."""
    vast_answers_stopped(standin)
    state = _at_finishing(tmp_path, write_spec, "late")
    layout = StateLayout(state)
    paths = layout.run_paths("late")
    paths.cancel_file.write_text('{"by": "runspec cancel"}')
    spec = load_spec(paths.spec_file)
    said: list[str] = []
    options = LifecycleOptions(progress=said.append, skip_preflight=True)
    with pytest.MonkeyPatch.context() as mp:
        for key, value in {**provider_env, **VAST}.items():
            mp.setenv(key, value)
        record = Lifecycle(spec, paths, RecordStore(state), options).run()
    assert record.status is RunStatus.FINISHED and "cancelled" in record.reason
    assert standin.made("DELETE") == [] and standin.made("PUT") == [], said


def test_a_cancel_left_for_whoever_drives_next_survives_the_resume_at_the_final_push(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    """A run left in its final push with nobody driving it: `cancel` says whoever drives it
    next applies no finish; `run --resume` (the next driver) used to delete the request and
    then destroyed the machine."""
    vast_answers_stopped(standin)
    state = tmp_path / "state"
    spec_file = write_spec("orphan", finish=DESTROY, push={"dir": str(tmp_path / "volume")})
    spec = load_spec(spec_file)
    accept(spec, state)
    trained(StateLayout(state).run_paths("orphan"), 1)
    store = RecordStore(state)
    record = pushed(store, "orphan", Termination.COMPLETED)  # its driver died here
    record.epoch = record.total_epochs = 1
    store.save(record)
    cancel = _cancel(state, "orphan")
    assert cancel.returncode == 0, cancel.stderr
    assert "whoever drives it next" in cancel.stdout and "applies no finish" in cancel.stdout
    proc = start_run(spec_file, state, {**provider_env, **VAST}, "--resume")
    code, out = finish_run(proc, timeout=240)
    assert code == 0, out[-4000:]
    assert "the cancel asked before stands: no finish follows the final push" in out, out
    assert standin.made("DELETE") == [] and standin.made("PUT") == [], out[-4000:]
    ended = record_of(state, "orphan")
    assert ended["status"] == "finished" and "cancelled" in ended["reason"], ended["reason"]
