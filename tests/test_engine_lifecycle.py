"""Each engine's lifecycle as its code plays it, around real `runspec run` attempts (issue 36).

Every attempt is a real subprocess on a FRESH state folder (an engine's new machine keeps
nothing of the last one's disk), training yolo9-t for real on the CPU and pushing to the local
Hub through the real huggingface_hub client. What the engine does between attempts is played
here, from its code (versions and lines: /work/shared/notes/engines.md):

- SkyPilot: a preemption or `sky jobs cancel` tears the VM down with no signal to the job
  (skypilot-org/skypilot:sky/jobs/recovery_strategy.py:1534, terminate before relaunch;
  sky/jobs/controller.py:3424-3510, cancel = terminate_cluster), so an attempt ends by SIGKILL
  of everything on the machine; a job that exits with a code in `recover_on_exit_codes` is
  relaunched "without incrementing the counter … regardless of max_restarts_on_errors"
  (sky/jobs/recovery_strategy.py:1343-1363), any other non-zero code is FAILED, and
  SKYPILOT_TASK_ID stays the same across recoveries (sky/skylet/constants.py:174-177).
- dstack: `retry` on its events resubmits the run whatever the exit code (no exit-code filter:
  dstackai/dstack:src/dstack/_internal/core/models/profiles.py:78-92; a FAILED job is the
  `error` event, core/models/runs.py:189-200); DSTACK_RUN_ID is the same across resubmissions.
- HF Jobs: `attempts` reruns the job, with the same environment, up to that many times in all
  (huggingface/huggingface_hub:src/huggingface_hub/hf_api.py:12170-12172); runspec's launch
  puts the run's task id in that environment (runspec.engines.hfjobs).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from runspec.clock import parse_utc_iso
from runspec.push.remote import ATTEMPTS, MANIFEST
from runspec.store.state import RunRecord, unnamed_edges
from tests.fixtures_run import RUNSPEC, SpecWriter, finish_run, record_of, wait_record
from tests.hubserver import HubServer

pytestmark = [pytest.mark.timeout(900), pytest.mark.training]


class Machine:
    """One attempt: a fresh machine (state folder) running `runspec run` as the engine does."""

    count = 0

    def __init__(self, tmp_path: Path, spec: Path, env: dict[str, str], *extra: str) -> None:
        Machine.count += 1
        self.state = tmp_path / f"machine-{Machine.count}"
        self.proc = subprocess.Popen(
            [*RUNSPEC, "run", str(spec), "--state", str(self.state), *extra],
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own group, as the job's processes on a VM
        )

    def finish(self) -> tuple[int, str]:
        return finish_run(self.proc, timeout=600)

    def torn_down(self, name: str) -> None:
        """The VM disappears: SIGKILL for everything on it, no signal first (SkyPilot's
        preemption and cancel). The trainer runs in its own session (runspec.trainer.launcher)."""
        trainer = self.state / "jobs" / name / "trainer.json"
        pids = [self.proc.pid]
        if trainer.exists():
            pids.append(json.loads(trainer.read_text())["identity"]["pid"])
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        self.proc.communicate(timeout=60)


def _json(hub: HubServer, repo: str, path: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(hub.read_file(repo, path))
    return data


def _checkpoints(hub: HubServer, repo: str) -> list[str]:
    if ("model", repo) not in hub.repos:
        return []
    return [f for f in hub.files(repo) if f.startswith("weights/")]


def test_skypilot_preempted_in_epoch_1_starts_over_with_the_budget_left_and_finishes(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    repo = "tester/preempted"
    spec = write_spec("preempted", epochs=2, push={"hub": {"repo": repo}})
    sky = {**hub_env, "SKYPILOT_TASK_ID": "sky-managed-2027-01-15_preempted_1"}
    first = Machine(tmp_path, spec, sky)
    wait_record(first.state, "preempted", lambda r: r["status"] == "training", timeout=300)
    first.torn_down("preempted")
    # Taken in epoch 1: nothing verified at the target, only the ledger written before the
    # preflight. Before issue 36 every later attempt exited 2, "nothing to resume".
    assert _checkpoints(hub_server, repo) == []
    ledger = _json(hub_server, repo, ATTEMPTS)
    started = ledger["budget_started_at"]
    assert [a["n"] for a in ledger["attempts"]] == [1] and ledger["attempts"][0]["exit"] is None

    second = Machine(tmp_path, spec, sky)
    code, out = second.finish()
    assert code == 0, out
    assert "from scratch" in out and "attempt 2: the budget left is" in out
    record = record_of(second.state, "preempted")
    assert record["termination"] == "completed" and record["budget_started_at"] == started
    manifest = _json(hub_server, repo, MANIFEST)
    assert manifest["final"] and manifest["epoch"] == 2
    ledger = _json(hub_server, repo, ATTEMPTS)
    assert [(a["n"], a["exit"]) for a in ledger["attempts"]] == [(1, None), (2, 0)]
    assert ledger["terminal"]["exit"] == 0

    # The same task again (an engine that reruns a finished job): it ends at the gate, before
    # the preflight, and nothing is pushed over the finished run.
    head = hub_server.repo(repo, "model").head
    third = Machine(tmp_path, spec, sky)
    code, out = third.finish()
    assert code == 0, out
    assert "ended for good" in out and "preflight" not in out
    assert _json(hub_server, repo, MANIFEST) == manifest
    assert hub_server.repo(repo, "model").head.keys() == head.keys()


def test_dstack_retries_a_deterministic_failure_only_as_far_as_the_bound(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    # A dataset whose images are missing: LibreYOLO fails the same way on every machine.
    data = tmp_path / "broken" / "data.yaml"
    data.parent.mkdir()
    data.write_text(f"path: {data.parent}\ntrain: images/train\nval: images/val\nnames: [a]\n")
    repo = "tester/broken"
    spec = write_spec("broken", epochs=2, dataset={"path": str(data)}, push={"hub": {"repo": repo}})
    dstack = {**hub_env, "DSTACK_RUN_ID": "0b7f5d1e-2a44-4c59-9d67-6c3b9e1f0a21"}
    codes, outs = [], []
    for _ in range(6):  # dstack resubmits on `error` whatever the code, until retry.duration
        code, out = Machine(tmp_path, spec, dstack).finish()
        codes.append(code)
        outs.append(out)
        if "ended for good" in out:
            break
    # Two failures (exit 1), the third at the bound says so and exits 2; a fourth machine
    # ends at the gate, before its preflight.
    assert codes == [1, 1, 2, 2], outs
    assert "3 attempts in a row added no verified epoch" in outs[2]
    assert "preflight" not in outs[3]
    ledger = _json(hub_server, repo, ATTEMPTS)
    assert [a["exit"] for a in ledger["attempts"]] == [1, 1, 2]
    assert ledger["terminal"]["exit"] == 2


def test_an_hf_jobs_retry_resumes_the_verified_checkpoint_and_a_new_launch_is_a_new_run(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    repo = "tester/hfretry"
    spec = write_spec("hfretry", epochs=3, push={"hub": {"repo": repo}})
    job = {**hub_env, "RUNSPEC_TASK_ID": "hf-0123456789abcdef"}
    first = Machine(tmp_path, spec, job, "--engine", "hf-jobs")
    # Eager under HF Jobs: epoch 1's checkpoint is pushed as it is written.
    wait_record(
        first.state,
        "hfretry",
        lambda r: (r["last_push"] or {}).get("epoch", 0) >= 1,
        timeout=300,
    )
    first.torn_down("hfretry")
    pushed = _json(hub_server, repo, MANIFEST)["epoch"]
    assert pushed >= 1
    one = record_of(first.state, "hfretry")

    # The engine's retry: the same task id on a fresh machine, and `runspec run` with no flag
    # resumes by itself (test_resume.py does it by hand, with --resume --keep-budget).
    second = Machine(tmp_path, spec, job, "--engine", "hf-jobs")
    code, out = second.finish()
    assert code == 0, out
    assert "resuming from" in out and "attempt 2: the budget left is" in out
    assert _json(hub_server, repo, MANIFEST)["final"]
    two = record_of(second.state, "hfretry")
    assert two["termination"] == "completed" and two["epoch"] == 3 and two["resumes"] == 1, two
    # Inside the first attempt's budget: the same deadline, and it ended before it.
    assert two["deadline"] == one["deadline"], (one["deadline"], two["deadline"])
    assert parse_utc_iso(two["ended_at"]) <= parse_utc_iso(one["deadline"])
    # The first attempt's story came with it, every change through the transition table.
    assert any(h["to"] == "training" for h in two["history"][: len(one["history"])])
    assert unnamed_edges(RunRecord.from_json(two).history) == [], two["history"]
    assert [h.get("via") for h in two["history"]].count("resume") == 1, two["history"]
    assert _json(hub_server, repo, "runspec/record.json")["termination"] == "completed"
    ledger = _json(hub_server, repo, ATTEMPTS)
    assert [a["verified_epoch"] for a in ledger["attempts"]] == [0, pushed]

    # Launched again: a new task id, a new run with a new budget, from scratch.
    held = _json(hub_server, repo, MANIFEST)["epoch"]
    time.sleep(1.0)  # budget starts are kept to the second
    third = Machine(
        tmp_path, spec, {**job, "RUNSPEC_TASK_ID": "hf-fedcba9876543210"}, "--engine", "hf-jobs"
    )
    code, out = third.finish()
    assert code == 0, out
    assert "task hf-fedcba9876543210 is new" in out and "resuming from" not in out
    again = _json(hub_server, repo, ATTEMPTS)
    assert again["task_id"] == "hf-fedcba9876543210" and len(again["attempts"]) == 1
    assert again["budget_started_at"] > ledger["budget_started_at"]
    assert again["attempts"][0]["verified_epoch"] == 0  # the old run's weights are not its own
    # What its followers read to start where it starts: the target held the older run's final
    # epoch, at the commit node 0 read (runspec.run.followstart).
    assert again["attempts"][0]["target_epoch"] == held
    assert re.fullmatch(r"[0-9a-f]{40}", again["attempts"][0]["commit"])
    # Its record's budget starts with it, not with the older run's.
    assert record_of(third.state, "hfretry")["started_at"] >= again["budget_started_at"]
