"""`runspec run`: whole runs, for real, through the command a user types.

Each test trains yolo9-t from scratch on the CPU, so each costs seconds; together they cover
the run's endings: completed, failed in LibreYOLO, failed in the preflight, a dead trainer
resumed, and the name rule.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path

import pytest

from runspec.run.accept import NameTaken, accept
from runspec.spec.loader import load_spec
from tests.fixtures_run import (
    SpecWriter,
    finish_run,
    record_of,
    start_run,
    wait_record,
)

pytestmark = pytest.mark.training


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_clean_run_completes_and_its_weights_are_verified_in_the_push_folder(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    spec = write_spec("clean", epochs=3, push={"dir": str(tmp_path / "volume")})
    state = tmp_path / "state"
    code, out = finish_run(start_run(spec, state))
    assert code == 0, out
    assert "epoch 3/3" in out
    assert "verified final push: epoch 3" in out
    record = record_of(state, "clean")
    assert record["termination"] == "completed"
    assert record["status"] == "finished"
    assert record["last_push"]["final"] is True
    pushed = tmp_path / "volume" / "clean"
    run_dir = state / "runs" / "clean"
    for rel in ("weights/last.pt", "weights/best.pt", "weights/epoch_3.pt", "metrics.jsonl"):
        assert sha256(pushed / rel) == sha256(run_dir / rel), rel
    # The spec as received travels with the weights.
    assert (pushed / "runspec" / "spec.yaml").read_text() == spec.read_text()
    # The states it went through, in order, each logged once.
    moves = [(h["from"], h["to"]) for h in record["history"]]
    assert moves == [
        ("queued", "preflight"),
        ("preflight", "staging"),
        ("staging", "training"),
        ("training", "pushing"),
        ("pushing", "finishing"),
        ("finishing", "finished"),
    ]


def test_weights_written_after_the_last_epoch_are_pushed_too(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    # average_best: LibreYOLO writes weights/average.pt after the last epoch's callback, so
    # only the trainer's completion marker vouches for it.
    spec = write_spec(
        "averaged",
        epochs=2,
        train={"args": {"average_best": 2}},
        push={
            "dir": str(tmp_path / "volume"),
            "files": ["weights/last.pt", "weights/average.pt", "train.log"],
        },
    )
    state = tmp_path / "state"
    code, out = finish_run(start_run(spec, state))
    assert code == 0, out
    average = state / "runs" / "averaged" / "weights" / "average.pt"
    assert average.is_file(), "LibreYOLO wrote no average.pt: the test proves nothing"
    pushed = tmp_path / "volume" / "averaged" / "weights" / "average.pt"
    assert pushed.is_file(), out
    assert sha256(pushed) == sha256(average)
    manifest = json.loads(
        (tmp_path / "volume" / "averaged" / "runspec" / "manifest.json").read_text()
    )
    assert "weights/average.pt" in {entry["path"] for entry in manifest["files"]}


def test_a_libreyolo_error_fails_the_run_without_retrying_and_still_pushes_its_logs(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    data = tmp_path / "broken" / "data.yaml"
    data.parent.mkdir()
    data.write_text(f"path: {data.parent}\ntrain: images/train\nval: images/val\nnames: [a]\n")
    spec = write_spec(
        "broken",
        epochs=2,
        dataset={"path": str(data)},
        push={"dir": str(tmp_path / "volume")},
        finish={"action": "command", "command": ["touch", str(tmp_path / "finished")]},
    )
    state = tmp_path / "state"
    code, out = finish_run(start_run(spec, state))
    assert code == 1, out
    record = record_of(state, "broken")
    assert record["termination"] == "failed-training"
    assert record["restarts_used"] == 0  # an exception LibreYOLO raised would recur
    assert "LibreYOLO failed" in record["why"]
    # It made no weights: nothing is pushed (issue 23; the preflight's one write may have made
    # the folder); the run says so.
    assert not (tmp_path / "volume" / "broken" / "runspec" / "spec.yaml").exists()
    assert "no weights were made" in out
    # A failed run still gets its finish: nothing unverified stands in its way.
    assert (tmp_path / "finished").exists()


def test_a_missing_gpu_fails_the_preflight_before_any_training(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    spec = write_spec("nogpu", epochs=2, train={"device": 0, "batch": 4})
    state = tmp_path / "state"
    code, out = finish_run(start_run(spec, state), timeout=120)
    assert code == 1, out
    record = record_of(state, "nogpu")
    assert record["termination"] == "failed-preflight"
    assert "GPU" in record["why"]
    assert not (state / "runs" / "nogpu" / "weights").exists()


def test_a_killed_trainer_is_resumed_from_its_newest_intact_checkpoint(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    # Two epochs after the kill at epoch 2 at the least (each takes over a second): the
    # trainer cannot have finished before it.
    spec = write_spec("phoenix", epochs=4, push={"dir": str(tmp_path / "volume")})
    state = tmp_path / "state"
    proc = start_run(spec, state)
    wait_record(state, "phoenix", lambda r: r["epoch"] >= 2, timeout=180)
    trainer = (state / "jobs" / "phoenix" / "trainer.json").read_text()
    pid = json.loads(trainer)["identity"]["pid"]
    os.kill(pid, signal.SIGKILL)
    code, out = finish_run(proc)
    assert code == 0, out
    record = record_of(state, "phoenix")
    assert record["termination"] == "completed"
    assert record["restarts_used"] == 1
    assert "restart 1/2" in out
    assert record["last_push"]["epoch"] == 4


def test_a_name_is_reused_only_by_the_same_unfinished_spec(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = tmp_path / "state"
    first = load_spec(write_spec("taken", epochs=2))
    accept(first, state)
    assert accept(first, state).name == "taken"  # the same spec again: resumed, not refused
    other = load_spec(write_spec("taken", epochs=3))
    with pytest.raises(NameTaken, match="another spec"):
        accept(other, state)
