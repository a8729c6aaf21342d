"""The attempt ledger at the seam: `runspec/attempts.json` written and read through the real
huggingface_hub client over HTTP against the local Hub, by the gate every attempt under an
engine passes before its preflight (runspec.run.attemptgate). Whole attempts with real training
are in tests/test_engine_lifecycle.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runspec.clock import ManualClock, utc_iso
from runspec.engines import onbox
from runspec.errors import Cause, Outcome
from runspec.push.remote import ATTEMPTS, MANIFEST
from runspec.run.attemptgate import NO_PROGRESS_LIMIT, open_attempt
from runspec.run.attempts import Attempt, DamagedLedger, Ledger
from runspec.spec.loader import load_spec
from runspec.spec.model import Spec
from runspec.store.state import PushRecord, RunRecord, Termination
from tests.fixtures_run import SpecWriter
from tests.hubserver import HubServer

REPO = "tester/ledger"
SHA = "a" * 64


def _spec(write_spec: SpecWriter, tmp_path: Path) -> Spec:
    path = write_spec("ledger", push={"hub": {"repo": REPO}})
    return load_spec(path, tmp_path / "state")


def _on_hub(hub: HubServer) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(hub.read_file(REPO, ATTEMPTS))
    return data


def _open(spec: Spec, tmp_path: Path, clock: ManualClock, task: str | None = "task-1") -> Any:
    said: list[str] = []
    # A fresh state folder per attempt: an engine's new machine keeps nothing of the last one.
    state = tmp_path / f"state-{clock.time():.0f}-{len(list(tmp_path.iterdir()))}"
    gate = open_attempt(spec, state, "SkyPilot", task, said.append, clock)
    assert gate is not None
    return gate, said


def test_the_first_attempt_writes_the_ledger_and_the_next_keeps_its_budget(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer
) -> None:
    spec = _spec(write_spec, tmp_path)
    clock = ManualClock()
    start = utc_iso(clock.time())
    gate, said = _open(spec, tmp_path, clock)
    assert gate.early is None and gate.attempt.n == 1
    # Written before anything slow: the repo did not exist, the ledger made it.
    ledger = _on_hub(hub_server)
    assert ledger["task_id"] == "task-1" and ledger["budget_started_at"] == start
    assert [a["n"] for a in ledger["attempts"]] == [1]
    assert any("attempt 1 of this run under SkyPilot" in line for line in said)
    clock.advance(600)
    gate, _ = _open(spec, tmp_path, clock)
    assert gate.early is None and gate.attempt.n == 2
    ledger = _on_hub(hub_server)
    assert ledger["budget_started_at"] == start  # never a new budget for the same task
    assert [a["n"] for a in ledger["attempts"]] == [1, 2]


def test_a_new_task_id_starts_a_new_run(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer
) -> None:
    spec = _spec(write_spec, tmp_path)
    clock = ManualClock()
    _open(spec, tmp_path, clock)
    clock.advance(3600 * 5)  # far past the first task's 30 minutes
    gate, said = _open(spec, tmp_path, clock, task="task-2")
    assert gate.early is None and gate.new_run and gate.attempt.n == 1
    assert any("task task-2 is new" in line for line in said)
    ledger = _on_hub(hub_server)
    assert ledger["task_id"] == "task-2"
    assert ledger["budget_started_at"] == utc_iso(clock.time())


def test_an_attempt_past_the_deadline_exits_0_before_anything_slow(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer
) -> None:
    spec = _spec(write_spec, tmp_path)
    clock = ManualClock()
    _open(spec, tmp_path, clock)
    clock.advance(spec.budget.wall_clock + 1)
    gate, said = _open(spec, tmp_path, clock)
    assert gate.early is Outcome.OK and gate.attempt is None
    assert any("nothing more is trained" in line and "exit 0" in line for line in said)
    ledger = _on_hub(hub_server)
    assert ledger["terminal"]["exit"] == 0 and len(ledger["attempts"]) == 1
    # The mark stands for every later attempt of the task.
    gate, said = _open(spec, tmp_path, clock)
    assert gate.early is Outcome.OK
    assert any("ended for good" in line for line in said)


def test_attempts_without_a_new_verified_epoch_are_bounded(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer
) -> None:
    spec = _spec(write_spec, tmp_path)
    clock = ManualClock()
    # Attempts killed with no word (SkyPilot's teardown sends no signal): judged at the next
    # attempt by what the target holds, here nothing verified.
    for n in range(1, NO_PROGRESS_LIMIT + 1):
        gate, _ = _open(spec, tmp_path, clock)
        assert gate.early is None and gate.attempt.n == n
        clock.advance(60)
    gate, said = _open(spec, tmp_path, clock)
    assert gate.early is Outcome.INVALID  # exit 2: no engine recovers it
    assert any(f"{NO_PROGRESS_LIMIT} attempts in a row added no verified epoch" in s for s in said)
    assert _on_hub(hub_server)["terminal"]["exit"] == 2
    gate, _ = _open(spec, tmp_path, clock)
    assert gate.early is Outcome.INVALID


def _record(epoch: int | None) -> RunRecord:
    push = None if epoch is None else PushRecord(epoch, "2027-01-15T08:00:00+00:00", None, [])
    return RunRecord(
        name="ledger", spec_sha256=SHA, termination=Termination.FAILED_TRAINING, last_push=push
    )


def test_a_new_verified_epoch_at_the_target_resets_the_count(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer
) -> None:
    spec = _spec(write_spec, tmp_path)
    clock = ManualClock()
    for _ in range(NO_PROGRESS_LIMIT - 1):
        _open(spec, tmp_path, clock)
    # The last attempt pushed epoch 1 before it was taken: the next one reads it there.
    entry = {"path": "weights/last.pt", "size": 1, "sha256": SHA, "epoch": 1, "time": ""}
    manifest = {"run": "ledger", "epoch": 1, "time": "", "final": False, "files": [entry]}
    hub_server.put_file(REPO, MANIFEST, json.dumps(manifest).encode(), repo_type="model")
    for _ in range(NO_PROGRESS_LIMIT):
        gate, said = _open(spec, tmp_path, clock)
        assert gate.early is None and gate.attempt.verified_epoch == 1, said
    gate, _ = _open(spec, tmp_path, clock)
    assert gate.early is Outcome.INVALID  # three in a row again since that epoch


# 75: SkyPilot's recover_on_exit_codes relaunches on it "without incrementing the counter …
# regardless of max_restarts_on_errors" (skypilot-org/skypilot:sky/jobs/recovery_strategy.py:
# 1343-1363): only runspec can bound it. 1: dstack's retry on `error` has no exit-code filter
# (dstackai/dstack:src/dstack/_internal/core/models/profiles.py:78-92).
@pytest.mark.parametrize("failed", [Outcome.RETRY, Outcome.FAILED])
def test_a_failure_at_the_bound_becomes_exit_2_at_its_own_end(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer, failed: Outcome
) -> None:
    spec = _spec(write_spec, tmp_path)
    clock = ManualClock()
    outcomes = []
    for _ in range(NO_PROGRESS_LIMIT):
        gate, _ = _open(spec, tmp_path, clock)
        outcomes.append(gate.close(_record(None), failed))
    assert outcomes == [failed] * (NO_PROGRESS_LIMIT - 1) + [Outcome.INVALID]
    ledger = _on_hub(hub_server)
    assert ledger["terminal"]["exit"] == 2 and ledger["attempts"][-1]["exit"] == 2


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"schema": 9}, "schema 9"),
        ({"budget_started_at": "yesterday"}, "Invalid isoformat"),
        ({"attempts": [{"n": -1}]}, "n is not a count"),
        ({"attempts": [{"n": 1, "started_at": "2027-01-15T08:00:00+00:00", "verified_epoch": 0,
                        "engine": "x", "shell": "rm -rf /"}]}, "unknown keys"),
        ({"terminal": {"reason": "x", "exit": 75, "at": "2027-01-15T08:00:00+00:00"}},
         "neither 0 nor 2"),
        ({"task_id": "x" * 500}, "task_id is not a short text"),
        ({"attempts": [None] * 51}, "at most 50"),
        ({"extra": 1}, "unknown keys"),
    ],
)  # fmt: skip
def test_a_ledger_someone_else_wrote_is_refused_in_one_line(
    change: dict[str, Any], words: str
) -> None:
    good = Ledger(
        "r",
        SHA,
        "t",
        "2027-01-15T08:00:00+00:00",
        [Attempt(1, "2027-01-15T08:00:00+00:00", 0, "dstack")],
    )
    assert Ledger.from_json(good.to_json(), "hub o/r") == good
    with pytest.raises(DamagedLedger, match=r"hub o/r: runspec/attempts\.json") as caught:
        Ledger.from_json({**good.to_json(), **change}, "hub o/r")
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_damaged_ledger_at_the_target_is_refused_before_anything_is_written(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer
) -> None:
    spec = _spec(write_spec, tmp_path)
    hub_server.put_file(REPO, ATTEMPTS, b'{"schema": 1, "schema": 1}', repo_type="model")
    with pytest.raises(DamagedLedger, match="the key 'schema' is there twice"):
        open_attempt(spec, tmp_path / "s", "dstack", None, print, ManualClock())
    assert hub_server.read_file(REPO, ATTEMPTS) == b'{"schema": 1, "schema": 1}'


def test_a_machine_that_can_never_run_the_spec_is_exit_2() -> None:
    # The GPU check types it where it decides (runspec.preflight.gpu): MACHINE_KIND, no fresh
    # machine of this kind passes; GPU, this machine's own. The record's words decide nothing.
    words = "gpu: train.device: 0 needs a GPU, but torch sees no CUDA GPU (a CPU-only build)"
    safe = onbox.Safety(True, "verified")
    for cause, outcome in ((Cause.MACHINE_KIND, Outcome.INVALID), (Cause.GPU, Outcome.RETRY)):
        for why in (words, "gpu: any words at all"):
            record = RunRecord(
                name="r",
                spec_sha256=SHA,
                termination=Termination.FAILED_PREFLIGHT,
                why=why,
                cause=cause,
            )
            assert onbox.engine_outcome(record, safe) is outcome, (cause, why)
