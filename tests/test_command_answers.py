"""Every command that answers for the daemon says what will happen (issue 35).

`runspec push NAME` verified a finished run's weights and answered "no finish applied (the
machine stays)" while the machine's end its run had armed (deferred, waiting for those very
weights) stood in machine.json: the daemon's next entry then applied it, a destroy now that
the weights were safe. The provider is the local stand-in for vast.ai's API
(tests/fixtures_providers.py); the push is the real command into a push folder.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from runspec.machine.endgame import Endgame
from runspec.machine.host import FinishHost
from runspec.run.accept import accept
from runspec.spec.loader import load_spec
from runspec.store.owner import RunLock, RunOwner, daemon_holder
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore, RunStatus, Termination
from runspec.trainer.launcher import TrainerHandle
from tests.fixtures_daemon import end_leftovers, runspec_cli
from tests.fixtures_providers import StandIn, vast_answers_stopped
from tests.fixtures_run import SpecWriter, wait_record
from tests.test_machine_safety import pushed, trained

VAST = {"CONTAINER_ID": "4242", "CONTAINER_API_KEY": "vast-key-answers-test"}


def test_push_says_the_armed_machine_end_it_makes_due(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    vast_answers_stopped(standin)
    state = tmp_path / "state"
    finish = {"action": "destroy", "provider": "vast", "unverified": "stop"}
    spec = load_spec(write_spec("later", finish=finish, push={"dir": str(tmp_path / "vol")}))
    accept(spec, state)
    # Another run is being driven (its owner's lock held, as a `runspec run` holds it): the
    # machine's end waits for it.
    accept(load_spec(write_spec("next", push={"dir": str(tmp_path / "vol")})), state)
    layout = StateLayout(state)
    driver = RunLock(layout.run_paths("next"))
    driver.acquire()
    store = RecordStore(state)
    other = store.load("next")
    assert other is not None
    for status in (RunStatus.PREFLIGHT, RunStatus.STAGING, RunStatus.TRAINING):
        store.transition(other, status, "test")
    paths = layout.run_paths("later")
    trained(paths, 1)  # weights on this disk only: the final push never verified
    store = RecordStore(state)
    record = pushed(store, "later", Termination.COMPLETED)
    store.transition(record, RunStatus.FINISHING, "completed; applying the finish action")
    host = FinishHost(env={**provider_env, **VAST}, end_window=30.0, retry_base=0.1)
    said: list[str] = []
    # The run's own end: armed for the machine, deferred while the other run is driven.
    Endgame(layout, host=host, say=said.append).finish_run(spec, paths, RunOwner(store, record))
    assert standin.made("DELETE") == [] and standin.made("PUT") == [], said
    assert json.loads(layout.machine_file.read_text())["pending"]["step"] == "armed"

    out = runspec_cli("push", "later", "--state", str(state))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "the machine stays" not in out.stdout, out.stdout
    assert "the machine's end armed for later (finish.action destroy) is still due" in out.stdout
    as_json = runspec_cli("push", "later", "--state", str(state), "--json")
    assert "still due" in json.loads(as_json.stdout)["machine_end"], as_json.stdout
    # And it is what happens: once the other run has ended, the next entry ends the machine,
    # now by the spec's destroy: the weights are verified.
    store.transition(other, RunStatus.PUSHING, "test", Termination.CANCELLED)
    store.transition(other, RunStatus.FINISHED, "cancelled")
    driver.release()
    Endgame(layout, host=host, say=said.append).enter()
    assert len(standin.made("DELETE")) == 1, said


@pytest.mark.training
def test_daemon_stop_says_the_trainer_it_leaves_running(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    """`daemon --stop` said "runspecd stopped" and nothing of the run it drove: its trainer
    keeps running, detached, with nobody to push it, stop it by the budget or end the machine.
    A real daemon, a real training."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    config = tmp_path / "runspecd.yaml"
    config.write_text("# defaults\n")
    config.chmod(0o600)
    common = ("--state", str(state), "--config", str(config))
    spec = write_spec(
        "left", epochs=200, push={"dir": str(tmp_path / "vol"), "every": "1h"},
        preflight={"disk": "600MB"}, finish={"action": "none"},
    )  # fmt: skip
    try:
        started = runspec_cli("daemon", "--detach", *common)
        assert started.returncode == 0, started.stdout + started.stderr
        submitted = runspec_cli("submit", str(spec), "--state", str(state))
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        wait_record(state, "left", lambda r: r["epoch"] >= 1, timeout=300)
        stopped = runspec_cli("daemon", "--stop", *common, timeout=400)
        handle = TrainerHandle.find(StateLayout(state).run_paths("left"))
        alive = handle is not None and handle.alive()
    finally:
        holder = daemon_holder(StateLayout(state))
        if holder is not None:
            os.kill(holder.pid, signal.SIGKILL)
        end_leftovers(state)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert alive, "the trainer was expected to outlive the daemon, as the answer says"
    assert "left: its trainer keeps running, detached" in stopped.stdout, stopped.stdout
    assert "until `runspec daemon --state" in stopped.stdout, stopped.stdout


def test_rm_says_what_a_run_at_its_finish_and_its_armed_end_come_to(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    """rm of a run applying its finish pointed at `runspec cancel`, which refuses such a run;
    rm of a run whose machine end is armed said nothing of that end, which still applies."""
    state = tmp_path / "state"
    finish = {"action": "destroy", "provider": "vast", "unverified": "stop"}
    spec = load_spec(write_spec("gone", finish=finish, push={"dir": str(tmp_path / "vol")}))
    accept(spec, state)
    layout = StateLayout(state)
    paths = layout.run_paths("gone")
    trained(paths, 1)
    store = RecordStore(state)
    record = pushed(store, "gone", Termination.COMPLETED)
    store.transition(record, RunStatus.FINISHING, "completed; applying the finish action")
    refused = runspec_cli("rm", "gone", "--state", str(state))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "is applying its finish" in refused.stderr and "cancel" not in refused.stderr
    store.transition(record, RunStatus.FINISHED, "finish deferred to the machine's end")
    Endgame(layout, say=print).arm(
        "gone", spec.finish, hourly_cost=None, weights=str(paths.run_dir), why="test"
    )
    removed = runspec_cli("rm", "gone", "--run-folder", "--state", str(state))
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "the machine's end it armed (destroy) is still due" in removed.stdout, removed.stdout


def test_submit_with_no_daemon_says_the_spec_waits(tmp_path: Path, write_spec: SpecWriter) -> None:
    state = tmp_path / "state"
    (state / "inbox").mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    out = runspec_cli("submit", str(write_spec("waits")), "--state", str(state))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"no daemon is running on {state}: the spec waits in the inbox" in out.stdout, out.stdout
