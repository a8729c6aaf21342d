"""The trainer works in its own run folder (issue 18): not in the weights cache every run
shares and may write, so nothing one run's dataset or model leaves there is where the next
trainer starts. The weights it starts from are still looked for, and downloaded, in the cache."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from runspec.trainer.control import TrainJob
from runspec.trainer.launcher import start
from runspec.trainer.modelbuild import model_path
from tests.fixtures_training import TinyJob, wait_epoch

pytestmark = pytest.mark.timeout(600)


@pytest.mark.training
def test_the_trainer_works_in_its_run_folder(tiny_job: TinyJob) -> None:
    job, paths = tiny_job("cwd", epochs=30)
    handle = start(job, paths, use_systemd=False)
    try:
        wait_epoch(paths, 1)
        assert Path(os.readlink(f"/proc/{handle.identity.pid}/cwd")) == paths.run_dir.resolve()
    finally:
        handle.stop(grace_s=300, reason="the test saw its folder")
    assert handle._proc is not None
    handle._proc.wait(timeout=30)


def test_the_weights_it_starts_from_are_the_caches(tiny_job: TinyJob) -> None:
    job, paths = tiny_job("models")
    cache = paths.weights_cache.resolve()
    # A name LibreYOLO downloads: into the cache's weights/, as LibreYOLO itself would put it.
    assert Path(model_path(job)) == cache / "weights" / "LibreYOLO9t.pt"
    # A checkpoint by a relative path: relative to the cache, as the preflight looks for it.
    assert Path(model_path(replace(job, model="mine/best.pt"))) == cache / "mine" / "best.pt"
    assert model_path(replace(job, model="/abs/best.pt")) == "/abs/best.pt"
    assert model_path(replace(job, model="hf://owner/repo")) == "hf://owner/repo"


def test_a_job_written_by_an_older_runspec_still_reads(tiny_job: TinyJob) -> None:
    job, _ = tiny_job("older")
    data = job.to_json()
    data["work_dir"] = data.pop("weights_cache")  # the field's name before
    assert TrainJob.from_json(data) == job


def _status(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


@pytest.mark.training
@pytest.mark.skipif(os.geteuid() != 0, reason="the walls a root launcher's trainer puts up")
def test_a_session_trainer_walls_itself_in(tiny_job: TinyJob) -> None:
    """Outside systemd (root in a container) the trainer puts up its unit's walls itself: no
    capability, no new privileges, and the inbox (and /etc/runspec) not there for it."""
    job, paths = tiny_job("walled", epochs=30)
    inbox = paths.state / "inbox"
    inbox.mkdir(parents=True)
    (inbox / "planted.yaml").write_text("a spec the trainer must not see\n")
    handle = start(job, paths, use_systemd=False)
    try:
        wait_epoch(paths, 1)
        status = _status(handle.identity.pid)
        assert status["NoNewPrivs"].strip() == "1"
        for caps in ("CapBnd", "CapEff", "CapPrm", "CapInh", "CapAmb"):
            assert int(status[caps], 16) == 0, (caps, status[caps])
        assert os.listdir(f"/proc/{handle.identity.pid}/root{inbox}") == []
    finally:
        handle.stop(grace_s=300, reason="the test saw its walls")
    assert handle._proc is not None
    handle._proc.wait(timeout=30)
    assert (inbox / "planted.yaml").exists()
