"""A whole run (the lifecycle `runspec run` drives) of a tiny real training, pushing to the
local Hub server: the checkpoints LibreYOLO wrote are the ones on the Hub, byte for byte."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from runspec.accept import accept
from runspec.lifecycle import Lifecycle, LifecycleOptions
from runspec.loader import load_spec
from runspec.paths import RunPaths
from runspec.state import RecordStore, Termination
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
  action: none
env:
  OMP_NUM_THREADS: 1
"""


@pytest.mark.training
def test_a_real_run_pushes_its_real_checkpoints(
    hub_server: HubServer, hub_token: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    spec_file = tmp_path / "pushrun.yaml"
    spec_file.write_text(SPEC)
    spec = load_spec(spec_file)
    state = tmp_path / "state"
    accept(spec, state, {"source": "test_push_training"})
    lines: list[str] = []
    options = LifecycleOptions(
        finish=False,
        progress=lines.append,
        push_min_interval=0.0,
        # The machine checks are the preflight's own tests; this one is about the weights.
        skip_preflight=True,
    )
    record = Lifecycle(spec, RunPaths.for_spec(spec, state), RecordStore(state), options).run()
    output = "\n".join(lines)
    assert record.termination is Termination.COMPLETED, output[-3000:]

    run_dir = state / "runs" / "pushrun"
    assert record.last_push is not None and record.last_push.final
    assert record.last_push.commit == hub_server.repo("me/pushrun").sha
    remote = hub_server.files("me/pushrun")
    for rel in ("weights/last.pt", "weights/best.pt", "weights/epoch_2.pt", "weights/epoch_4.pt"):
        assert rel in remote, rel
        local = hashlib.sha256((run_dir / rel).read_bytes()).hexdigest()
        assert hub_server.entry("me/pushrun", rel).sha256 == local, rel
    for rel in ("status.json", "metrics.jsonl", "train.log", "runspec/record.json"):
        assert rel in remote, rel
    assert hub_server.read_file("me/pushrun", "runspec/spec.yaml") == SPEC.encode()
    # Each verified push printed one line naming its epoch and size.
    assert any(line.startswith("pushed epoch") and "verified" in line for line in lines), output
    # More than one push named the checkpoints, yet each object crossed the wire once.
    commits = hub_server.repo("me/pushrun").commits
    assert len(commits) >= 2, output
    puts = [r.path for r in hub_server.log if r.op == "lfs_put" and r.status == 200]
    assert puts and len(puts) == len(set(puts))
    best_objects = {
        files["weights/best.pt"].sha256 for _, files, _ in commits if "weights/best.pt" in files
    }
    for sha in best_objects:
        assert puts.count(f"/_lfs_upload/{sha}") == 1
    out, err = capfd.readouterr()
    assert hub_token not in out + err + output
