"""A finish that acts for the whole machine (deferred while other specs ran, or the daemon's
idle finish) may count as verified only when every run that trained here is safe elsewhere."""

from __future__ import annotations

from pathlib import Path

from runspec.accept import accept
from runspec.loader import load_spec
from runspec.model import Spec
from runspec.state import PushRecord, RecordStore, RunStatus, Termination
from runspec.verdict import machine_weights_safe
from tests.fixtures_run import SpecWriter


def ended(store: RecordStore, name: str, *, trained: bool, final_push: bool | None) -> None:
    record = store.load(name)
    assert record is not None
    for status in (RunStatus.PREFLIGHT, RunStatus.STAGING, RunStatus.TRAINING):
        store.transition(record, status, "test")
    if trained:
        record.run_dir = f"/runs/{name}"
    if final_push is not None:
        record.last_push = PushRecord(epoch=3, time="t", commit="c", files=[], final=final_push)
    store.transition(record, RunStatus.PUSHING, "test", Termination.COMPLETED)
    store.transition(record, RunStatus.FINISHED, "test")


def test_one_unverified_or_unpushed_run_makes_the_whole_machine_unsafe(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = tmp_path / "state"
    store = RecordStore(state)

    def load(name: str) -> Spec:
        return load_spec(state / "jobs" / name / "spec.yaml")

    volume = {"dir": str(tmp_path / "volume")}
    accept(load_spec(write_spec("pushed", push=volume)), state)
    accept(load_spec(write_spec("failed-early", push=volume)), state)
    ended(store, "pushed", trained=True, final_push=True)
    ended(store, "failed-early", trained=False, final_push=None)  # never trained: no weights
    accept(load_spec(write_spec("waiting", push=volume)), state)  # queued: no weights either
    assert machine_weights_safe(store, load) == (True, "every run's final push is verified")

    accept(load_spec(write_spec("local-only")), state)  # no push section
    ended(store, "local-only", trained=True, final_push=None)
    safe, why = machine_weights_safe(store, load)
    assert not safe and "local-only" in why and "only on this disk" in why


def test_a_run_whose_final_push_failed_makes_the_machine_unsafe(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = tmp_path / "state"
    store = RecordStore(state)
    accept(load_spec(write_spec("flaky", push={"dir": str(tmp_path / "v")})), state)
    ended(store, "flaky", trained=True, final_push=False)
    safe, why = machine_weights_safe(
        store, lambda name: load_spec(state / "jobs" / name / "spec.yaml")
    )
    assert not safe and "flaky" in why
