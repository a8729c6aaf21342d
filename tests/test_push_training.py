"""A whole `runspec run` of a tiny real training, pushing to the local Hub server: the
checkpoints LibreYOLO wrote are the ones on the Hub, byte for byte; then its finish stops the
machine through vast's API (the stand-in, tests/fixtures_providers.py), and the stop the
provider confirmed is added beside the receipt."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures_providers import StandIn, VastInstance
from tests.hubserver import HubServer

SPEC = """\
runspec: 1
name: pushrun
dataset:
  synthetic: {train: 8, val: 4, imgsz: 64, classes: 3, seed: 0}
train:
  model: yolo9-t
  epochs: 4
  batch: 4
  imgsz: 32
  device: cpu
  save_period: 2
  args: {pretrained: false, workers: 0, eval_interval: 1, patience: 0, amp: false}
push:
  hub: {repo: me/pushrun, private: true}
  every: 1h
budget:
  wall_clock: 30m
finish:
  action: stop
  provider: vast
env:
  OMP_NUM_THREADS: 1
"""


@pytest.mark.training
def test_runspec_run_pushes_its_real_checkpoints(
    hub_server: HubServer,
    xet_env: dict[str, str],
    hub_token: str,
    tmp_path: Path,
    standin: StandIn,
    provider_env: dict[str, str],
) -> None:
    """Through Xet, as a rented box pushes (tests/hubxet.py)."""
    box = VastInstance(standin)
    vast = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "vast-box-key"}
    spec = tmp_path / "pushrun.yaml"
    spec.write_text(SPEC)
    state = tmp_path / "state"
    proc = subprocess.run(
        [sys.executable, "-m", "runspec", "run", str(spec), "--state", str(state)],
        env={**os.environ, **xet_env, **vast},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]

    run_dir = state / "runs" / "pushrun"
    record = json.loads((state / "jobs" / "pushrun" / "record.json").read_text())
    assert record["termination"] == "completed"
    assert record["last_push"]["final"] is True
    # The final push's commit, then the card's own commit on top of it, then the receipt's,
    # then the stop vast confirmed. The lease's own commits (runspec/lease.json, issue 22)
    # come and go beside the run's.
    commits = [c for c in hub_server.repo("me/pushrun").commits if "lease of" not in c[2]]
    assert record["last_push"]["commit"] == commits[-4][0]
    assert commits[-3][2] == "runspec: model card" and "README.md" in commits[-3][1]
    assert commits[-2][2] == "runspec: receipt" and "runspec/receipt.json" in commits[-2][1]
    assert commits[-1][2] == "runspec: the end, confirmed", [c[2] for c in commits]
    assert box.effects == ["PUT"]  # stopped once, by the box's own finish
    receipt = json.loads(hub_server.read_file("me/pushrun", "runspec/receipt.json"))
    assert receipt["finish"] == {
        "action": "stop",
        "provider": "vast",
        "instance": "4242",
        "unverified": receipt["finish"]["unverified"],
        "confirmation": "runspec/end.json",
    }
    end = json.loads(hub_server.read_file("me/pushrun", "runspec/end.json"))
    assert end["by"] == "box" and end["confirmed"] is True and end["action"] == "stop"
    assert (end["provider"], end["instance"], end["run"]) == ("vast", "4242", "pushrun")
    remote = hub_server.files("me/pushrun")
    for rel in ("weights/last.pt", "weights/best.pt", "weights/epoch_2.pt", "weights/epoch_4.pt"):
        assert rel in remote, rel
        local = hashlib.sha256((run_dir / rel).read_bytes()).hexdigest()
        assert hub_server.entry("me/pushrun", rel).sha256 == local, rel
    for rel in ("status.json", "metrics.jsonl", "train.log", "runspec/record.json"):
        assert rel in remote, rel
    assert hub_server.read_file("me/pushrun", "runspec/spec.yaml") == SPEC.encode()
    # Each verified push printed one line naming its epoch and size.
    assert "pushed epoch" in output and "verified" in output, output[-4000:]
    # More than one push named the checkpoints, yet each file's bytes reached the store once:
    # nothing took the LFS path, and Xet holds no more than the distinct checkpoints' bytes.
    commits = hub_server.repo("me/pushrun").commits
    assert len(commits) >= 2, output[-4000:]
    assert hub_server.count("lfs_put") == 0 and hub_server.xet is not None
    distinct = {
        entry.sha256: entry.size
        for _, files, _ in commits
        for entry in files.values()
        if entry.xet_hash is not None
    }
    assert distinct and hub_server.xet.stored_bytes() <= sum(distinct.values()) * 1.01
    assert hub_token not in output
