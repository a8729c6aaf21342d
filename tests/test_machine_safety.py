"""The machine may end only when every run's newest weights are verified off it, judged from the
files on the disk at that moment, never from a saved flag."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from runspec.clock import SYSTEM
from runspec.machine.endgame import Endgame
from runspec.machine.host import FinishHost
from runspec.machine.verdict import machine_verdict, run_safety
from runspec.providers.vast import Vast
from runspec.push import Pusher
from runspec.run.accept import accept
from runspec.spec.loader import load_spec
from runspec.store.owner import RunOwner
from runspec.store.paths import RunPaths, StateLayout
from runspec.store.state import RecordStore, RunRecord, RunStatus, Termination
from runspec.timers import Timers
from runspec.trainer.control import EpochMarker, FileStat, write_epoch_marker
from tests.fixtures_providers import StandIn, VastInstance
from tests.fixtures_push import write_checkpoint
from tests.fixtures_run import SpecWriter


def trained(paths: RunPaths, epoch: int) -> None:
    """What a trainer leaves after `epoch`: last.pt and the marker vouching for it."""
    last = paths.run_dir / "weights" / "last.pt"
    write_checkpoint(last, epoch, size=1000)
    files = {"weights/last.pt": FileStat.of(last)}
    write_epoch_marker(paths.control_dir, EpochMarker(epoch, 5, 1.0, False, time.time(), files))


def pushed(store: RecordStore, name: str, termination: Termination) -> RunRecord:
    """A run taken through its phases to its final push, as a lifecycle would."""
    record = store.load(name)
    assert record is not None
    for status in (RunStatus.PREFLIGHT, RunStatus.STAGING, RunStatus.TRAINING):
        store.transition(record, status, "test")
    store.transition(record, RunStatus.PUSHING, "test", termination)
    return record


def ended(store: RecordStore, name: str, termination: Termination) -> RunRecord:
    record = pushed(store, name, termination)
    store.transition(record, RunStatus.FINISHED, "test")
    return record


def push_final(state: Path, name: str) -> None:
    paths = StateLayout(state).run_paths(name)
    spec = load_spec(paths.spec_file)
    store = RecordStore(state)
    record = store.load(name)
    assert record is not None
    pusher = Pusher(
        spec,
        paths,
        RunOwner(store, record),
        min_interval=0.0,
        progress=print,
        timers=Timers(SYSTEM),  # only pushed now: no push.every here
    )
    pusher.start()
    try:
        assert pusher.push_now(final=True, timeout=60) is not None
    finally:
        pusher.stop()


def test_a_newer_checkpoint_than_the_verified_one_makes_the_run_unsafe(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = tmp_path / "state"
    spec = load_spec(write_spec("newer", push={"dir": str(tmp_path / "volume")}))
    accept(spec, state)
    paths = StateLayout(state).run_paths("newer")
    store = RecordStore(state)
    trained(paths, 3)
    push_final(state, "newer")
    ended(store, "newer", Termination.COMPLETED)
    record = store.load("newer")
    assert record is not None
    assert run_safety(paths, spec, record).safe
    assert machine_verdict(StateLayout(state)).safe

    # The trainer (resumed, say) wrote a newer last.pt that no push verified.
    time.sleep(0.01)
    trained(paths, 4)
    safety = run_safety(paths, spec, record)
    assert not safety.safe and "weights/last.pt on this disk is not the copy verified" in safety.why
    verdict = machine_verdict(StateLayout(state))
    assert verdict.verdict == "unsafe" and "newer" in verdict.why


def test_a_run_that_pushes_nowhere_makes_the_machine_unsafe_once_it_trained(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = tmp_path / "state"
    accept(load_spec(write_spec("local-only")), state)
    accept(load_spec(write_spec("waiting")), state)  # queued: never trained, nothing on disk
    store = RecordStore(state)
    ended(store, "local-only", Termination.FAILED_PREFLIGHT)
    assert machine_verdict(StateLayout(state)).safe  # it never wrote weights
    trained(StateLayout(state).run_paths("local-only"), 2)
    verdict = machine_verdict(StateLayout(state))
    assert verdict.verdict == "unsafe" and "only on this disk" in verdict.why
    # With a daemon to run it, a queued run makes the machine's end wait.
    assert machine_verdict(StateLayout(state), daemon_alive=True).verdict == "wait"


def test_a_damaged_record_makes_the_machine_unsafe_never_blocked(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = tmp_path / "state"
    accept(load_spec(write_spec("fine")), state)
    accept(load_spec(write_spec("broken")), state)
    record_file = StateLayout(state).run_paths("broken").record_file
    record_file.write_bytes(b"\x8f\x01\xff\xfe\x00\x13\x88\x9a")
    verdict = machine_verdict(StateLayout(state))  # never a destroy; a stop may still end it
    assert verdict.verdict == "unsafe" and "broken is damaged" in verdict.why
    assert "runspec rm broken" in verdict.why
    shutil.rmtree(StateLayout(state).job_dir("broken"))
    assert machine_verdict(StateLayout(state)).safe


def _machine_mid_destroy(state: Path) -> None:
    """machine.json as a daemon leaves it when killed right after it recorded a destroy."""
    pending = {
        "run": "first",
        "finish": {"action": "destroy", "provider": "vast", "command": [], "unverified": "stop"},
        "hourly_cost": None,
        "weights": "",
        "why": "test",
        "armed_at": "2026-11-30T00:00:00+00:00",
        "step": "applying",
        "action": "destroy",
        "verified": True,
    }
    (state / "machine.json").write_text(json.dumps({"schema": 1, "pending": pending}))


def test_a_destroy_begun_before_a_restart_is_never_sent_again_onto_unsafe_weights(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    VastInstance(standin)  # reads running: the first DELETE never arrived
    env = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "k"}
    vast = Vast(env, confirm_timeout=1.0, poll_interval=0.2)
    host = FinishHost(provider=vast, end_window=20.0, retry_base=0.2)
    accept(load_spec(write_spec("later")), state)  # arrived after the restart: trained since
    store = RecordStore(state)
    ended(store, "later", Termination.COMPLETED)
    trained(StateLayout(state).run_paths("later"), 1)  # pushes nowhere: weights only here
    _machine_mid_destroy(state)
    outcome = Endgame(StateLayout(state), host=host, say=lambda line: None).enter()
    # Confirmed only, never requested anew; the stop it falls back to keeps the disk.
    assert outcome.result is not None and outcome.result.action == "stop", outcome
    assert outcome.result.ok and standin.made("DELETE") == []

    # The same resume with every run safe: the destroy that never arrived is requested once.
    shutil.rmtree(StateLayout(state).job_dir("later"))
    with standin.lock:
        standin.requests.clear()  # a fresh instance, running
    _machine_mid_destroy(state)
    outcome = Endgame(StateLayout(state), host=host, say=lambda line: None).enter()
    assert outcome.result is not None and outcome.result.ok, outcome
    assert len(standin.made("DELETE")) == 1
