"""The multi-GPU path without GPUs: LibreYOLO's own DDP coordinator, driven on CPU.

With `device: "0,1,..."` LibreYOLO runs training in a coordinator (its own session) and mp.spawn
ranks; runspec's callback runs in the rank-0 worker, two processes away from the trainer. The
trainer's hidden RUNSPEC_TRAINER_CPU_DDP option sends the real trainer program through
`spawn_for_model` with two CPU ranks (gloo, sync_bn off), so this is the production path save
for NCCL.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import psutil
import pytest

from runspec.trainer import control
from runspec.trainer.checkpoints import complete_checkpoints, is_intact
from runspec.trainer.child import CPU_DDP_ENV
from runspec.trainer.control import TrainerOutcome
from runspec.trainer.launcher import start
from tests.fixtures_training import TinyJob, wait_epoch, wait_for

pytestmark = pytest.mark.timeout(600)


def test_a_stop_request_stops_ddp_training_at_an_epoch_boundary(tiny_job: TinyJob) -> None:
    job, paths = tiny_job("ddp", epochs=30)
    job = dataclasses.replace(job, env={**job.env, CPU_DDP_ENV: "2"})
    handle = start(job, paths)
    wait_epoch(paths, 1)
    tree = psutil.Process(handle.identity.pid).children(recursive=True)
    # The coordinator, its resource tracker and two ranks, outside the trainer's session.
    assert len(tree) >= 3
    sessions = {os.getsid(p.pid) for p in tree}
    assert os.getsid(handle.identity.pid) not in sessions
    assert "DDP active: rank=0/2" in (paths.run_dir / "console.log").read_text()

    handle.request_stop("cancelled under DDP")
    wait_for(lambda: not handle.alive(), 300, "the DDP trainer to exit")
    result = handle.result()
    assert result is not None and result.outcome == TrainerOutcome.STOPPED, result
    assert result.reason == "cancelled under DDP"
    marker = control.read_epoch_marker(paths.control_dir)
    assert marker is not None and 1 <= marker.epoch <= 2 < marker.total_epochs
    assert f"after epoch {marker.epoch}" in result.detail
    assert is_intact(paths.run_dir / "weights" / "last.pt")
    complete = {c.relpath: c.epoch for c in complete_checkpoints(paths.run_dir, paths.control_dir)}
    assert complete["weights/last.pt"] == marker.epoch
    # Every process of the tree is gone, the ranks included.
    _, alive = psutil.wait_procs(tree, timeout=30)
    assert alive == []


def _says(log: Path, line: str) -> bool:
    return log.exists() and line in log.read_text()


def test_kill_now_reaches_the_coordinator_in_its_own_session(tiny_job: TinyJob) -> None:
    job, paths = tiny_job("ddpkill", epochs=30)
    job = dataclasses.replace(job, env={**job.env, CPU_DDP_ENV: "2"})
    lines: list[str] = []
    handle = start(job, paths, log_line=lines.append)
    # Both ranks have joined (rank 0 says so once the process group is up): the whole tree
    # is there to be killed; no epoch needs to run first.
    console = paths.run_dir / "console.log"
    wait_for(lambda: _says(console, "DDP active: rank=0/2"), 300, "the DDP ranks")
    tree = psutil.Process(handle.identity.pid).children(recursive=True)
    assert len(tree) >= 3, tree
    coordinator = next(p for p in tree if p.ppid() == handle.identity.pid)
    handle.kill_now()
    # Signalled directly, by identity, not left to notice its parent's death.
    assert f"sent SIGKILL to trainer descendant {coordinator.pid}" in lines
    _, alive = psutil.wait_procs(tree, timeout=30)
    assert alive == []
    result = handle.result()
    assert result is not None and result.outcome == TrainerOutcome.KILLED
