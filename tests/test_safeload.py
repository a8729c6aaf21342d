"""A checkpoint a resume starts from is loaded as data, never unpickled as code (issue 34)."""

from __future__ import annotations

import dataclasses
import json
import pathlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import torch
from torch.serialization import get_unsafe_globals_in_checkpoint

from runspec.push.hubrecord import record_json
from runspec.push.manifest import Manifest, ManifestEntry, digest_file
from runspec.push.remote import MANIFEST, RECORD
from runspec.spec.loader import load_spec
from runspec.store.state import RunRecord, RunStatus
from runspec.trainer import control
from runspec.trainer.control import TrainerOutcome
from runspec.trainer.launcher import start
from runspec.trainer.safeload import ALLOWED, UnsafeCheckpoint, load_as_data, trained_epochs
from tests.fixtures_daemon import end_leftovers
from tests.fixtures_run import SpecWriter, finish_run, start_run
from tests.fixtures_training import TinyJob, wait_for
from tests.hubserver import HubServer

pytestmark = pytest.mark.timeout(600)


class _Planted:
    """What a hostile repo holds: unpickling it touches `marker` (it could run anything)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def _plant(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # A checkpoint in LibreYOLO's shape (epoch 0, a model), with the object hidden inside.
    torch.save({"epoch": 0, "model": {"w": torch.zeros(2)}, "config": _Planted(marker)}, path)


@pytest.mark.training
def test_a_resume_from_a_planted_pickle_runs_none_of_it_and_says_why(
    tiny_job: TinyJob, tmp_path: Path
) -> None:
    """The real launcher starts the real trainer on a checkpoint that, unpickled, would run
    code as the trainer's root: nothing of it runs, and the run fails with one clear line."""
    marker = tmp_path / "code-ran"
    job, paths = tiny_job("planted", epochs=2)
    checkpoint = paths.run_dir / "weights" / "last.pt"
    _plant(checkpoint, marker)
    job = dataclasses.replace(job, resume_from=str(checkpoint))
    handle = start(job, paths, use_systemd=False)
    wait_for(lambda: not handle.alive(), 300, "the trainer's exit")
    result = handle.result()
    assert not marker.exists(), "the planted pickle ran"
    assert result is not None and result.outcome is TrainerOutcome.FAILED, result
    assert "refused, nothing in it was run" in result.reason, result
    assert "'pathlib.Path'" in result.reason or "getattr" in result.reason, result
    assert control.read_epoch_marker(paths.control_dir) is None  # it never trained
    console = Path(job.log).read_text()
    assert "refused, nothing in it was run" in console, console[-2000:]


def test_the_epoch_of_a_planted_pickle_is_never_read_by_unpickling(tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    _plant(tmp_path / "last.pt", marker)
    with pytest.raises(UnsafeCheckpoint, match="refused, nothing in it was run"):
        trained_epochs(tmp_path / "last.pt")
    assert not marker.exists()


@pytest.mark.training
def test_libreyolos_own_checkpoints_need_nothing_beyond_the_allow_list(tiny_job: TinyJob) -> None:
    """The allow list is what a real LibreYOLO checkpoint holds: saved here, every file of a
    finished run loads as data, and its epoch is read that way."""
    job, paths = tiny_job("allowlist", epochs=1)
    handle = start(job, paths, use_systemd=False)
    wait_for(lambda: not handle.alive(), 300, "the trainer's exit")
    result = handle.result()
    assert result is not None and result.outcome is TrainerOutcome.COMPLETED, result
    allowed = {f"{g.__module__}.{g.__qualname__}" for g in ALLOWED}
    files = sorted((paths.run_dir / "weights").glob("*.pt"))
    assert files
    for path in files:
        assert set(get_unsafe_globals_in_checkpoint(path)) <= allowed, path
        assert isinstance(load_as_data(path), dict)
    assert trained_epochs(paths.run_dir / "weights" / "last.pt") == 1


@pytest.mark.training
def test_a_resume_from_the_hub_of_a_planted_checkpoint_runs_none_of_it(
    hub_server: HubServer,
    hub_env: dict[str, str],
    write_spec: SpecWriter,
    tmp_path: Path,
) -> None:
    """Someone with write access to the run's repo replaces its newest checkpoint (and the
    manifest's sha256 of it) with a pickle that runs code when loaded: the resume on a fresh
    machine downloads it, verified against that manifest, and runs none of it. The Hub holds
    the live run's record (killed in epoch 2, its budget running) and, as the attacker left
    them, the manifest and the last.pt it names: no training is needed to plant them."""
    spec_path = write_spec(
        "planted", epochs=4, push={"hub": {"repo": "me/planted"}, "every": "1h"},
        train={"save_period": 1}, finish={"action": "none"},
    )  # fmt: skip
    second = tmp_path / "machine2"
    marker = tmp_path / "code-ran"
    planted = tmp_path / "planted.pt"
    _plant(planted, marker)
    digest = digest_file(planted)
    spec = load_spec(spec_path)
    started = datetime.now(UTC) - timedelta(minutes=1)
    record = RunRecord(
        name="planted", spec_sha256=spec.sha256, status=RunStatus.TRAINING,
        started_at=started.isoformat(timespec="seconds"),
        deadline=(started + timedelta(minutes=30)).isoformat(timespec="seconds"),
        epoch=1, total_epochs=4,
    )  # fmt: skip
    at = started.isoformat(timespec="seconds")
    entry = ManifestEntry("weights/last.pt", digest.size, digest.sha256, 1, at)
    manifest = Manifest("planted", 1, at, False, (entry,))
    hub_server.put_file("me/planted", "weights/last.pt", planted.read_bytes(), "model")
    hub_server.put_file("me/planted", MANIFEST, json.dumps(manifest.to_json()).encode(), "model")
    text = json.dumps(record_json(record, manifest)).encode()
    hub_server.put_file("me/planted", RECORD, text, "model")
    proc = start_run(spec_path, second, hub_env, "--resume", "--keep-budget")
    try:
        code, out = finish_run(proc, timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        end_leftovers(second)
    assert not marker.exists(), "the planted pickle ran on the resume"
    assert code != 0, out[-4000:]
    assert "resuming from last.pt (hub me/planted)" in out, out[-4000:]
    assert "refused, nothing in it was run" in out, out[-4000:]
    assert "planted: resume refused: the checkpoint" in out, out[-4000:]
    assert "LibreYOLO failed" not in out, out[-4000:]
