"""The lifecycle's edges that need no training: an unexpected error in a phase, and a signal
before training starts. Both must still get the run's files off the machine."""

from __future__ import annotations

from pathlib import Path

import pytest

import runspec.run.giveup
import runspec.run.lifecycle
from runspec.run.accept import accept
from runspec.run.lifecycle import Lifecycle, LifecycleOptions
from runspec.spec.loader import load_spec
from runspec.store.paths import RunPaths
from runspec.store.state import RecordStore
from tests.fixtures_run import SpecWriter


def lifecycle_for(spec_file: Path, state: Path, lines: list[str]) -> Lifecycle:
    spec = load_spec(spec_file)
    accept(spec, state)
    options = LifecycleOptions(progress=lines.append, skip_preflight=True)
    return Lifecycle(spec, RunPaths.for_spec(spec, state), RecordStore(state), options)


def test_an_unexpected_error_in_a_phase_still_pushes_and_finishes(
    tmp_path: Path, write_spec: SpecWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_disk(*args: object, **kwargs: object) -> Path:
        raise OSError(5, "Input/output error")

    # The narrowest seam: the one call that would hit the failing disk. (A full disk is not an
    # error but a state the run waits out: see test_disk_full.py.)
    monkeypatch.setattr(runspec.run.giveup, "stage_dataset", broken_disk)
    touched = tmp_path / "finish-ran"
    spec = write_spec(
        "fulldisk",
        push={"dir": str(tmp_path / "volume")},
        finish={"action": "command", "command": ["touch", str(touched)]},
    )
    lines: list[str] = []
    record = lifecycle_for(spec, tmp_path / "state", lines).run()
    assert record.status.value == "finished"
    assert record.termination is not None and record.termination.value == "failed-staging"
    assert "Input/output error" in record.why
    # No weights were made: nothing is pushed, no folder made for weights that do not exist
    # (issue 23), and nothing unverified stands in the way of the finish.
    assert record.last_push is None
    assert not (tmp_path / "volume" / "fulldisk").exists()
    assert any("no weights were made" in line for line in lines), lines
    assert touched.exists()  # a failed run still gets its finish


def test_a_signal_before_training_pushes_and_skips_the_finish(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    touched = tmp_path / "finish-ran"
    spec = write_spec(
        "early",
        push={"dir": str(tmp_path / "volume")},
        finish={"action": "command", "command": ["touch", str(touched)]},
    )
    lines: list[str] = []
    lifecycle = lifecycle_for(spec, tmp_path / "state", lines)
    lifecycle.requests.interrupt()
    record = lifecycle.run()
    assert record.termination is not None and record.termination.value == "interrupted"
    assert not lifecycle.paths.trainer_file.exists()  # no trainer was started
    assert record.last_push is None  # no weights: nothing to push, no folder made
    assert not touched.exists()
