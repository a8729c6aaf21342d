"""`runspec run` under an engine (SkyPilot, dstack, HF Jobs), through the real command: the engine
owns the machine, so no provider is called and nothing is powered off; the exit status tells
the engine what to do; its stop signal pushes the newest checkpoint and exits within its grace.

Training is real (yolo9-t from scratch on the CPU), the Hub is the local server, and the
provider is the local stand-in, which must see nothing.
"""

from __future__ import annotations

import hashlib
import json
import signal
import time
from pathlib import Path

import psutil
import pytest

from runspec.engines.onbox import Engine, detect, engine_outcome
from runspec.errors import Cause, Outcome, UsageError
from runspec.machine.verdict import Safety
from runspec.push.remote import LEASE
from runspec.store.state import RunRecord, Termination
from tests.fixtures_providers import StandIn
from tests.fixtures_run import SpecWriter, finish_run, record_of, start_run, wait_record
from tests.hubserver import HubServer

pytestmark = pytest.mark.timeout(600)

SKYPILOT = {"SKYPILOT_TASK_ID": "sky-managed-2026-12-01-13-00-00-000000_engine_1"}
DSTACK = {"DSTACK_RUN_ID": "9f3c0c8e-5b7a-4b8e-a1f2-0d9e8c7b6a5f"}


def test_engines_are_recognised_by_their_task_variables_or_named() -> None:
    sky = detect(SKYPILOT)
    assert sky is not None and sky.engine is Engine.SKYPILOT
    assert sky.task_id == SKYPILOT["SKYPILOT_TASK_ID"]
    # SkyPilot tears a preempted or cancelled VM down without a signal (sky/core.py, down():
    # backend.teardown unless --graceful): only a checkpoint already pushed survives (issue 36).
    assert sky.eager_push
    dstack = detect(DSTACK)
    assert dstack is not None and dstack.engine is Engine.DSTACK and dstack.grace == 10.0
    assert dstack.eager_push  # SIGKILL 10 s after SIGINT: the newest checkpoint must be out
    named = detect({"RUNSPEC_ENGINE": "hf-jobs"})
    assert named is not None and named.engine is Engine.HF_JOBS and named.task_id is None
    flag = detect({**DSTACK}, "skypilot")
    assert flag is not None and flag.engine is Engine.SKYPILOT and flag.task_id is None
    assert detect({"PATH": "/usr/bin", "SKYPILOT_TASK_ID": " "}) is None
    with pytest.raises(UsageError, match="unknown engine 'slurm'"):
        detect({"RUNSPEC_ENGINE": "slurm"})


def _ended(term: Termination, why: str = "", cause: Cause | None = None) -> RunRecord:
    return RunRecord(name="r", spec_sha256="0", termination=term, why=why, cause=cause)


SAFE, UNSAFE = Safety(True, "verified"), Safety(False, "weights/last.pt was never verified")
GPU, LINK = Cause.GPU, Cause.LINK


@pytest.mark.parametrize(
    ("term", "why", "cause", "safety", "outcome"),
    [
        (Termination.COMPLETED, "", None, SAFE, Outcome.OK),
        (Termination.BUDGET, "", None, SAFE, Outcome.OK),
        (Termination.COMPLETED, "", None, UNSAFE, Outcome.UNVERIFIED),
        (Termination.INTERRUPTED, "", None, SAFE, Outcome.RETRY),
        (Termination.INTERRUPTED, "", None, UNSAFE, Outcome.UNVERIFIED),
        (
            Termination.FAILED_PREFLIGHT,
            "gpu: train.device: 0 needs a GPU",
            GPU,
            SAFE,
            Outcome.RETRY,
        ),
        (
            Termination.FAILED_PREFLIGHT,
            "collective: all_reduce timed out",
            LINK,
            SAFE,
            Outcome.RETRY,
        ),
        (
            Termination.FAILED_PREFLIGHT,
            "gpu: train.batch: 6 is the global batch and does not",
            None,
            SAFE,
            Outcome.INVALID,
        ),
        (
            Termination.FAILED_PREFLIGHT,
            "dataset: the Hub has no dataset repo org/x",
            None,
            SAFE,
            Outcome.INVALID,
        ),
        (
            Termination.FAILED_STAGING,
            "dataset.hub.file ds.tar is not in org/ds",
            None,
            SAFE,
            Outcome.INVALID,
        ),
        (
            Termination.FAILED_TRAINING,
            "DistBackendError: NCCL error in: ProcessGroupNCCL.cpp",
            LINK,
            UNSAFE,
            Outcome.RETRY,
        ),
        (Termination.FAILED_TRAINING, "KeyError: 'names'", None, SAFE, Outcome.FAILED),
        # The words are the spec's, not the machine's: no cause, no fresh machine (issue 38).
        (
            Termination.FAILED_TRAINING,
            "ValueError: train.args NCCL_DEBUG: CUDA error name",
            None,
            SAFE,
            Outcome.FAILED,
        ),
        (Termination.LOST, "the trainer died 3 times", None, SAFE, Outcome.FAILED),
    ],
)
def test_each_ending_tells_the_engine_what_to_do(
    term: Termination, why: str, cause: Cause | None, safety: Safety, outcome: Outcome
) -> None:
    """The exit status comes from the record's typed cause, never from its words."""
    assert engine_outcome(_ended(term, why, cause), safety) is outcome


@pytest.mark.training
def test_under_skypilot_finish_destroy_calls_no_provider_and_exits_0(
    tmp_path: Path,
    write_spec: SpecWriter,
    hub_server: HubServer,
    hub_env: dict[str, str],
    standin: StandIn,
    provider_env: dict[str, str],
) -> None:
    spec = write_spec(
        "sky",
        epochs=2,
        push={"hub": {"repo": "tester/sky"}},
        finish={"action": "destroy", "provider": "vast"},
    )
    # On vast.ai (a RunPod pod id too, which auto-detection reads), and no vast key: under
    # the engine none is needed.
    env = {**hub_env, **provider_env, **SKYPILOT, "CONTAINER_ID": "4242", "RUNPOD_POD_ID": "pod9"}
    state = tmp_path / "state"
    code, out = finish_run(start_run(spec, state, env), timeout=300)
    assert code == 0, out
    assert standin.made() == [], "under an engine runspec called the provider"
    record = record_of(state, "sky")
    assert record["termination"] == "completed" and record["last_push"]["final"] is True
    assert record["finish"] == {}
    # Said once; no failsafe was armed that could end the engine's machine later.
    said = f"under SkyPilot (task {SKYPILOT['SKYPILOT_TASK_ID']}): the engine owns this machine"
    assert out.count(said) == 1, out
    assert "finish.action destroy is not applied" in out
    assert not (state / "jobs" / "sky" / "failsafe.json").exists()
    assert "failsafe:" not in out
    assert (
        hub_server.entry("tester/sky", "weights/last.pt").sha256
        == hashlib.sha256((state / "runs" / "sky" / "weights" / "last.pt").read_bytes()).hexdigest()
    )
    # Its lease names no instance: a `runspec watch` must never end the engine's machine.
    lease = json.loads(hub_server.read_file("tester/sky", LEASE, repo_type="model"))
    assert lease["state"] == "finished" and lease["final_verified"] is True, lease
    assert lease["provider"] is None and lease["instance"] is None, lease


@pytest.mark.training
def test_a_final_push_never_verified_exits_3_under_an_engine(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    spec = write_spec(
        "lost",
        epochs=1,
        push={"hub": {"repo": "tester/lost"}},
        budget={"wall_clock": "60s", "reserve": "10s", "overrun": "5s"},
    )
    hub_server.fail("commit", "500", times=10_000)  # the Hub takes no commit, ever
    state = tmp_path / "state"
    code, out = finish_run(start_run(spec, state, {**hub_env, **DSTACK}), timeout=300)
    assert code == 3, out
    record = record_of(state, "lost")
    assert record["termination"] in ("completed", "budget") and record["last_push"] is None


def test_a_machine_without_the_gpu_the_spec_needs_is_permanent_under_an_engine(
    tmp_path: Path, write_spec: SpecWriter, hub_env: dict[str, str]
) -> None:
    # This machine has no NVIDIA device at all: an engine that gives such machines for the
    # task will give another one like it, so exit 2 ends the task (issue 36), where 75 would
    # ask SkyPilot for machine after machine. On a machine with a GPU, device 7 is missing
    # instead: that is 75, another machine may have it.
    spec = write_spec("nogpu", train={"device": "7"})
    state = tmp_path / "state"
    code, out = finish_run(start_run(spec, state, {**hub_env, **SKYPILOT}), timeout=300)
    assert code == (75 if Path("/dev/nvidiactl").exists() else 2), out
    record = record_of(state, "nogpu")
    assert record["termination"] == "failed-preflight" and record["why"].startswith("gpu: ")
    # The same machine without an engine: a failed run, the old exit status.
    other = write_spec("nogpu2", train={"device": "7"})
    code, out = finish_run(start_run(other, state, hub_env), timeout=300)
    assert code == 1, out


def test_a_missing_dataset_is_permanent_and_a_bad_spec_too(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    spec = write_spec(
        "nodata",
        dataset={"hub": {"repo": "tester/no-such-dataset", "file": "ds.tar"}, "data": "ds/d.yaml"},
    )
    state = tmp_path / "state"
    # HF Jobs sets no variable runspec can rely on: it is named.
    proc = start_run(spec, state, hub_env, "--engine", "hf-jobs")
    code, out = finish_run(proc, timeout=300)
    assert code == 2, out
    assert "under HF Jobs: the engine owns this machine" in out
    assert record_of(state, "nodata")["termination"] in ("failed-preflight", "failed-staging")
    bad = tmp_path / "bad.yaml"
    bad.write_text("runspec: 1\nname: bad\ntrain: {epochs: many}\n")
    code, out = finish_run(start_run(bad, state, {**hub_env, **DSTACK}), timeout=120)
    assert code == 2, out


def _on_hub(hub: HubServer, repo: str) -> list[str]:
    return hub.files(repo) if ("model", repo) in hub.repos else []


@pytest.mark.training
def test_sigterm_under_dstack_exits_within_its_grace_with_the_newest_checkpoint_verified(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    spec = write_spec(
        "stopped",
        epochs=200,
        train={"save_period": 1},
        preflight={"disk": "600MB"},
        # The spec's own schedule would push every 15 minutes: under dstack every checkpoint
        # goes as soon as it is written.
        push={"hub": {"repo": "tester/stopped"}, "every": "15m"},
    )
    state = tmp_path / "state"
    proc = start_run(spec, state, {**hub_env, **DSTACK})
    wait_record(state, "stopped", lambda r: r["epoch"] >= 3, timeout=240)
    # Pushed as written, while training goes on: no signal asked for these.
    end = time.monotonic() + 120
    while "weights/epoch_3.pt" not in _on_hub(hub_server, "tester/stopped"):
        assert time.monotonic() < end, "epoch 3's checkpoint was not pushed as it was written"
        time.sleep(0.2)
    trainer = json.loads((state / "jobs" / "stopped" / "trainer.json").read_text())
    marker = json.loads((state / "jobs" / "stopped" / "control" / "epoch.json").read_text())
    proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    code, out = finish_run(proc, timeout=60)
    took = time.monotonic() - signalled
    assert took < 10.0, f"exited {took:.1f} s after SIGTERM, past dstack's 10 s grace:\n{out}"
    assert code == 75, out
    # The newest complete checkpoint when the signal came is on the Hub, byte for byte.
    newest = f"weights/epoch_{marker['epoch']}.pt"
    local = state / "runs" / "stopped" / newest
    assert hub_server.entry("tester/stopped", newest).sha256 == (
        hashlib.sha256(local.read_bytes()).hexdigest()
    )
    assert record_of(state, "stopped")["termination"] == "interrupted"
    # The trainer did not outlive the run.
    pid = trainer["identity"]["pid"]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.training
def test_a_hung_hub_still_lets_the_run_exit_within_dstacks_grace(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    spec = write_spec(
        "hung",
        epochs=200,
        preflight={"disk": "600MB"},
        push={"hub": {"repo": "tester/hung"}, "every": "15m"},
    )
    state = tmp_path / "state"
    proc = start_run(spec, state, {**hub_env, **DSTACK})
    pushed = wait_record(
        state, "hung", lambda r: (r["last_push"] or {}).get("epoch", 0) >= 2, timeout=240
    )["last_push"]["epoch"]
    trainer = json.loads((state / "jobs" / "hung" / "trainer.json").read_text())
    hub_server.fail("commit", "hang", times=10_000)  # it takes each commit and never answers
    # A checkpoint newer than the verified one is written, and can no longer be verified (sent
    # at once, the signal could find every checkpoint verified: that run rightly exits 75).
    marker = state / "jobs" / "hung" / "control" / "epoch.json"
    end = time.monotonic() + 120
    while json.loads(marker.read_text())["epoch"] <= pushed:
        assert time.monotonic() < end, f"no checkpoint past epoch {pushed} within 120 s"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    code, out = finish_run(proc, timeout=60)
    took = time.monotonic() - signalled
    assert took < 10.0, f"exited {took:.1f} s after SIGTERM, past dstack's 10 s grace:\n{out}"
    # Ended by runspec itself before the engine's SIGKILL, saying the push is not verified.
    assert code == 3, out
    assert "dstack's grace is nearly over: exiting before its SIGKILL" in out
    assert "exit 3 (unverified)" in out
    pid = trainer["identity"]["pid"]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
