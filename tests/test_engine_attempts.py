"""The attempt ledger at the seam: `runspec/attempts.json` written and read through the real
huggingface_hub client over HTTP against the local Hub, by the gate every attempt under an
engine passes before its preflight (runspec.run.attemptgate). Whole attempts with real training
are in tests/test_engine_lifecycle.py."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from runspec.clock import ManualClock, utc_iso
from runspec.engines import onbox
from runspec.errors import Cause, Outcome, UsageError
from runspec.push.hubrecord import record_json
from runspec.push.manifest import Manifest, ManifestEntry
from runspec.push.owner_check import earlier_run
from runspec.push.remote import ATTEMPTS, GATED_TASK, MANIFEST, RECORD
from runspec.run.attemptgate import CLOSE_SIGNALLED_S, NO_PROGRESS_LIMIT, open_attempt
from runspec.run.attempts import WRITE_S, Attempt, DamagedLedger, Ledger
from runspec.run.follower import Start, start_of
from runspec.spec.loader import load_spec
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths
from runspec.store.state import PushRecord, RunRecord, RunStatus, Termination
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
        ({"attempts": [{"n": 1, "started_at": "2027-01-15T08:00:00+00:00", "verified_epoch": 0,
                        "engine": "x", "commit": "../main"}]}, "commit is not a commit id"),
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
    # A ledger written before attempts kept where the target stood is read as it was.
    old = {
        **good.to_json(),
        "attempts": [
            {
                "n": 1,
                "started_at": "2027-01-15T08:00:00+00:00",
                "verified_epoch": 0,
                "engine": "dstack",
            }
        ],
    }
    assert Ledger.from_json(old, "hub o/r") == good
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


def _push_epoch(hub: HubServer, spec: Spec, epoch: int) -> str:
    """The target as a verified push of `epoch` leaves it: its last.pt, the manifest that
    lists it and the run's record (tests/test_engine_multinode.py seeds the same files)."""
    weights = b"the weights of epoch %d" % epoch
    digest = hashlib.sha256(weights).hexdigest()
    entry = ManifestEntry("weights/last.pt", len(weights), digest, epoch, "2027-01-15T08:00:00Z")
    manifest = Manifest(spec.name, epoch, "2027-01-15T08:00:01+00:00", False, (entry,))
    record = RunRecord(
        name=spec.name,
        spec_sha256=spec.sha256,
        status=RunStatus.FINISHED,
        termination=Termination.INTERRUPTED,
        started_at="2027-01-15T08:00:00+00:00",  # its ledger's budget start (ManualClock's)
    )
    hub.put_file(REPO, "weights/last.pt", weights, repo_type="model")
    hub.put_file(REPO, RECORD, json.dumps(record_json(record, manifest)).encode(), "model")
    return hub.put_file(REPO, MANIFEST, json.dumps(manifest.to_json()).encode(), "model")


def _follower(spec: Spec, tmp_path: Path, task: str) -> tuple[Start, list[str]]:
    """Where node 1's ranks start, read on a fresh machine of its own, as `follow` reads it."""
    said: list[str] = []
    paths = RunPaths.for_spec(spec, tmp_path / f"node1-{task}-{len(list(tmp_path.iterdir()))}")
    begin = start_of(spec, paths, said.append, resume=True, asked=False, task_id=task)
    assert isinstance(begin, Start), said
    return begin, said


def test_a_follower_of_a_new_task_starts_from_scratch_as_node_0_does(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer
) -> None:
    """Node 0 of task 2 wrote its new ledger first: the follower reads the same task id there,
    and must not resume task 1's checkpoint beside a node 0 that trains from scratch."""
    spec = _spec(write_spec, tmp_path)
    clock = ManualClock()
    _open(spec, tmp_path, clock, task="task-1")
    _push_epoch(hub_server, spec, 1)  # task 1 pushed epoch 1, then ended
    gate, _ = _open(spec, tmp_path, clock, task="task-2")  # node 0 of task 2
    assert gate.new_run
    begin, said = _follower(spec, tmp_path, "task-2")
    assert begin == Start(), said  # from scratch: no checkpoint, the spec's epochs
    assert not any("resuming" in line for line in said), said


def test_a_follower_that_reads_before_node_0s_entry_starts_where_node_0_will(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer
) -> None:
    """Both nodes start together: the newest entry may be the last attempt's, taken without a
    word (SkyPilot) after it pushed epoch 1. Node 0's gate will resume epoch 1, so must node 1,
    whether it reads the ledger before node 0's entry or after it."""
    spec = _spec(write_spec, tmp_path)
    clock = ManualClock()
    _open(spec, tmp_path, clock)  # attempt 1, from scratch: its entry stays open
    _push_epoch(hub_server, spec, 1)
    before, said = _follower(spec, tmp_path, "task-1")
    assert before.checkpoint is not None, said
    assert before.checkpoint.read_bytes() == b"the weights of epoch 1", said
    gate, _ = _open(spec, tmp_path, clock)  # node 0 of attempt 2
    assert gate.attempt.verified_epoch == 1
    after, said = _follower(spec, tmp_path, "task-1")
    assert after.checkpoint is not None and after.epochs == before.epochs, said
    assert after.checkpoint.read_bytes() == b"the weights of epoch 1", said


def test_the_end_written_after_a_stop_signal_gives_up_within_its_cap(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer
) -> None:
    """The engine's SIGKILL comes 10 s after its signal (dstack): a Hub that hangs the end's
    commit must not hold the exit past CLOSE_SIGNALLED_S. The hang (HANG_S, 60 s) is far
    longer than the join: without the cap the join ends first and the test fails."""
    spec = _spec(write_spec, tmp_path)
    gate, said = _open(spec, tmp_path, ManualClock())
    before = _on_hub(hub_server)
    hub_server.fail("commit", mode="hang")
    out: list[Outcome] = []
    closing = threading.Thread(
        target=lambda: out.append(gate.close(_record(None), Outcome.RETRY, signalled=True)),
        daemon=True,
    )
    closing.start()
    closing.join(CLOSE_SIGNALLED_S + 15)
    assert not closing.is_alive(), "the end's write held the exit past its cap"
    assert out == [Outcome.RETRY]  # 75: a fresh machine, as the engine was told
    assert any(f"cannot write {ATTEMPTS}" in line for line in said), said
    assert _on_hub(hub_server) == before  # the end is not there: the next gate judges it


def test_the_earlier_run_refusal_stands_aside_only_for_the_run_the_ledger_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new task of an engine's run writes over the older task's files (its gate admitted it
    and named it in the ledger); a ledger of another run, another spec or another task, or a
    run outside an engine (no gate), leaves the refusal standing."""
    ledger = {"run": "r", "spec_sha256": SHA, "task_id": "task-2", "schema": 1}
    files = {RECORD: json.dumps({"name": "r", "started_at": "2027-01-01T00:00:00Z"}).encode()}
    ours = {"name": "r", "spec_sha256": SHA, "started_at": "2027-01-15T08:00:00Z"}

    def refused(**change: Any) -> bool:
        files[ATTEMPTS] = json.dumps({**ledger, **change}).encode()
        return earlier_run("model repo o/r", "r", ours, files.get) is not None

    monkeypatch.delenv(GATED_TASK, raising=False)
    assert refused()  # no gate admitted this process's run
    monkeypatch.setenv(GATED_TASK, "task-2")
    assert not refused()
    assert refused(run="another") and refused(task_id="task-1") and refused(spec_sha256="b" * 64)
    files[ATTEMPTS] = b"not a ledger"
    assert earlier_run("model repo o/r", "r", ours, files.get) is not None
    # Read as strictly as the gate reads it: a duplicated key names nothing (plain JSON would
    # take the last "run" and stand aside for a file the gate refuses as damaged).
    files[ATTEMPTS] = json.dumps({**ledger, "run": "another"}).encode()[:-1] + b', "run": "r"}'
    assert earlier_run("model repo o/r", "r", ours, files.get) is not None


@pytest.mark.parametrize("size", [100_000, 2 << 20])
def test_a_ledger_too_big_to_be_runspecs_is_refused_in_one_line(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer, size: int
) -> None:
    """runspec's ledger keeps 50 attempts, a few kilobytes: a bigger file (a valid one padded,
    or megabytes of anything) is not its, and the attempt must not go on uncounted."""
    spec = _spec(write_spec, tmp_path)
    good = Ledger("ledger", SHA, None, "2027-01-15T08:00:00+00:00")
    body = json.dumps(good.to_json()).encode()
    body += b" " * (size - len(body))
    hub_server.put_file(REPO, ATTEMPTS, body, repo_type="model")
    said: list[str] = []
    with pytest.raises(DamagedLedger, match=r"hub tester/ledger: runspec/attempts\.json") as got:
        open_attempt(spec, tmp_path / "s", "dstack", None, said.append, ManualClock())
    assert "over 65536 bytes" in str(got.value) and "\n" not in str(got.value)
    assert hub_server.read_file(REPO, ATTEMPTS) == body  # nothing written over it


def test_a_target_unreadable_for_a_moment_is_read_again_and_the_attempt_counted(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer
) -> None:
    spec = _spec(write_spec, tmp_path)
    clock = ManualClock()
    _open(spec, tmp_path, clock)
    hub_server.fail("repo_info", "500", times=2)  # the head's read, twice
    gate, said = _open(spec, tmp_path, clock)
    assert gate.early is None and gate.attempt.n == 2, said
    assert [a["n"] for a in _on_hub(hub_server)["attempts"]] == [1, 2]


def test_a_target_that_stays_unreadable_asks_for_a_fresh_machine_before_anything_slow(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer
) -> None:
    """Where the run stands is unknown: training it from scratch with a new budget could
    write over its verified weights once the Hub answers again. Exit 75 within the write's
    time, having tried again meanwhile."""
    spec = _spec(write_spec, tmp_path)
    clock = ManualClock()
    _open(spec, tmp_path, clock)
    before = _on_hub(hub_server)
    hub_server.down()
    started = clock.monotonic()
    gate, said = _open(spec, tmp_path, clock)
    hub_server.up()
    assert gate.early is Outcome.RETRY and gate.attempt is None, said
    assert clock.monotonic() - started <= WRITE_S  # the clock the gate slept on
    assert any("trying again" in line for line in said), said
    assert any("exit 75" in line and "nothing is trained" in line for line in said), said
    assert _on_hub(hub_server) == before


def test_a_token_the_hub_refuses_at_the_gate_is_exit_2_not_an_endless_75(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer
) -> None:
    """SkyPilot recovers 75 without counting it: a token that may not read the target would
    ask for machines for ever. A 401 is said once, with its fix."""
    spec = _spec(write_spec, tmp_path)
    hub_server.fail("repo_info", "echo", status=401, times=50)
    with pytest.raises(UsageError, match="HTTP 401") as got:
        open_attempt(spec, tmp_path / "s", "SkyPilot", "t", print, ManualClock())
    assert "token" in str(got.value) and "\n" not in str(got.value)
    assert hub_server.token not in str(got.value)


def test_a_new_tasks_second_attempt_starts_from_scratch_not_from_the_older_runs_weights(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer
) -> None:
    """Task 2's first attempt was taken before it pushed anything: the target still holds
    task 1's record and checkpoint, which are not task 2's progress. Its next attempt goes on
    from scratch with task 2's budget left, as its followers do."""
    spec = _spec(write_spec, tmp_path)
    clock = ManualClock()
    _open(spec, tmp_path, clock, task="task-1")
    _push_epoch(hub_server, spec, 1)
    clock.advance(3600 * 5)
    _open(spec, tmp_path, clock, task="task-2")  # taken without a word
    clock.advance(600)
    gate, said = _open(spec, tmp_path, clock, task="task-2")
    assert gate.attempt.n == 2 and gate.attempt.verified_epoch == 0, said
    state = tmp_path / "node0-again"
    resumed = gate.resume(state, "SkyPilot")
    assert resumed is not None and resumed.checkpoint is None, resumed
    assert (
        "from scratch" in resumed.source
        and "attempt 2: the budget left is 20m" in resumed.budget_line
    )
    begin, said = _follower(spec, tmp_path, "task-2")
    assert begin == Start(), said
