"""The end of billing, through real runs: the budget stops training in time, a final push that
cannot be verified never lets the machine be destroyed, and SIGTERM gets the newest complete
checkpoint off the machine at once.

Training is real (yolo9-t from scratch on the CPU); the Hub is the local server; the provider
is a local stand-in for vast.ai's API (a destroy cannot be tested against the real thing).
"""

from __future__ import annotations

import hashlib
import json
import signal
import time
from pathlib import Path

import pytest

from runspec.clock import parse_utc_iso
from runspec.trainer.checkpoints import is_intact
from tests.fixtures_cpu import CpuCap
from tests.fixtures_daemon import trainer_pid
from tests.fixtures_providers import StandIn, vast_answers_stopped
from tests.fixtures_run import SpecWriter, finish_run, record_of, start_run, wait_record
from tests.hubserver import HubServer

pytestmark = pytest.mark.training

VAST_KEY = "vast-key-budget-test"


def test_the_budget_stops_training_at_an_epoch_boundary_and_finishes_before_the_deadline(
    tmp_path: Path,
    write_spec: SpecWriter,
    hub_server: HubServer,
    hub_env: dict[str, str],
    cpu_cap: CpuCap,
) -> None:
    touched = tmp_path / "finish-ran"
    spec = write_spec(
        "budgeted",
        epochs=500,  # far more than 55 s allow
        # 500 epochs would keep 50 epoch_N.pt files: the disk check's auto estimate (3 GB)
        # depends on the test machine's free disk; the budget ends the run long before.
        # patience 0: LibreYOLO's early stop would end this learn-nothing run before the budget.
        train={"save_period": 10, "args": {"patience": 0}},
        preflight={"disk": "600MB"},
        push={"hub": {"repo": "tester/budgeted"}, "every": "15m"},
        budget={"wall_clock": "55s", "reserve": "15s"},
        finish={"action": "command", "command": ["touch", str(touched)]},
    )
    state = tmp_path / "state"
    proc = start_run(spec, state, hub_env)
    wait_record(state, "budgeted", lambda r: r["epoch"] >= 1, timeout=120)
    # A slower trainer from here (a tenth of a core): the budget still ends it in time, the
    # driver, who stops it, pushes and finishes, at full speed.
    cpu_cap.hold(trainer_pid(state, "budgeted"))
    cpu_cap.limit(0.1)
    code, out = finish_run(proc, timeout=180)
    assert code == 0, out
    record = record_of(state, "budgeted")
    assert record["termination"] == "budget", out
    assert 1 <= record["epoch"] < 500
    # The finish ran, after the verified final push and before the deadline.
    assert touched.exists()
    deadline = parse_utc_iso(record["deadline"])
    assert touched.stat().st_mtime <= deadline, "the finish ran after the deadline"
    pushed_at = parse_utc_iso(record["last_push"]["time"])
    assert record["last_push"]["final"] is True
    assert pushed_at <= parse_utc_iso(record["finish"]["started_at"])
    # What the Hub holds is byte-for-byte the run's newest complete checkpoint (the staged
    # copy: had the point of no return cut an epoch mid-save, the run folder's last.pt would be
    # the torn one).
    remote = hub_server.entry("tester/budgeted", "weights/last.pt")
    staged = state / "jobs" / "budgeted" / "staged" / "weights" / "last.pt"
    assert is_intact(staged)
    assert remote.sha256 == hashlib.sha256(staged.read_bytes()).hexdigest()
    # The epoch lines said early where the budget would cut the run; the Hub's model card
    # says why it stopped, beside the curves it shows.
    assert "the budget stops it at about epoch" in out and " of 500" in out
    card = hub_server.read_file("tester/budgeted", "README.md").decode()
    assert f"| epochs | {record['epoch']} of 500 |" in card and "| ended | budget" in card
    assert hub_server.read_file("tester/budgeted", "runspec/curves.png").startswith(b"\x89PNG")


def test_an_unverifiable_final_push_never_destroys_the_machine(
    tmp_path: Path,
    write_spec: SpecWriter,
    hub_server: HubServer,
    hub_env: dict[str, str],
    standin: StandIn,
    provider_env: dict[str, str],
) -> None:
    vast_answers_stopped(standin)
    spec = write_spec(
        "refused",
        epochs=2,
        push={"hub": {"repo": "tester/refused"}, "every": "15m"},
        # Two epochs fit with room to spare even on a loaded machine; the Hub then refuses.
        budget={"wall_clock": "75s", "reserve": "10s", "overrun": "5s"},
        finish={"action": "destroy", "provider": "vast", "unverified": "stop"},
    )
    env = {**hub_env, **provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": VAST_KEY}
    state = tmp_path / "state"
    proc = start_run(spec, state, env)
    wait_record(state, "refused", lambda r: r["status"] == "training", timeout=120)
    hub_server.fail("commit", "500", times=10_000)  # from here on the Hub refuses every push
    code, out = finish_run(proc, timeout=240)
    assert code == 3, out  # ended, but the final push could not be verified
    record = record_of(state, "refused")
    assert record["termination"] == "completed"
    assert record["last_push"] is None or record["last_push"]["final"] is False
    assert standin.made("DELETE") == [], "destroyed a machine holding the only copy of its weights"
    (stop,) = standin.made("PUT")
    assert json.loads(stop.body) == {"state": "stopped"}
    assert record["finish"]["action"] == "stop"


def files_there(hub: HubServer, repo: str) -> list[str]:
    """The repo's files; none while it does not exist (it is created by the first push)."""
    return hub.files(repo) if ("model", repo) in hub.repos else []


def test_sigterm_pushes_the_newest_complete_checkpoint_within_five_seconds(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    touched = tmp_path / "finish-ran"
    spec = write_spec(
        "preempted",
        epochs=200,
        train={"save_period": 1},
        # A checkpoint per epoch for 200 epochs is 9 GB by the auto estimate, more than a CI
        # machine may have free; the signal ends the run after a few.
        preflight={"disk": "600MB"},
        push={"hub": {"repo": "tester/preempted"}, "every": "15m"},
        finish={"action": "command", "command": ["touch", str(touched)]},
    )
    state = tmp_path / "state"
    proc = start_run(spec, state, hub_env)
    # Past the first push: from here the one-commit-a-minute rule holds checkpoint pushes back,
    # so only the signal can get the newest checkpoint out this soon.
    wait_record(state, "preempted", lambda r: r["epoch"] >= 3, timeout=180)
    marker = json.loads((state / "jobs" / "preempted" / "control" / "epoch.json").read_text())
    newest = marker["epoch"]
    proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    wanted = f"weights/epoch_{newest}.pt"
    while wanted not in files_there(hub_server, "tester/preempted"):
        assert time.monotonic() - signalled < 5.0, f"{wanted} not on the Hub 5 s after SIGTERM"
        time.sleep(0.1)
    local = state / "runs" / "preempted" / wanted
    assert hub_server.entry("tester/preempted", wanted).sha256 == (
        hashlib.sha256(local.read_bytes()).hexdigest()
    )
    code, out = finish_run(proc, timeout=120)
    record = record_of(state, "preempted")
    assert record["termination"] == "interrupted", out
    assert code == 1
    assert not touched.exists(), "an interrupted run must not apply the finish action"
    assert hub_env["HF_TOKEN"] not in out
