"""A wall clock that cannot hold one epoch plus the end's reserve: the profile says so before
any training, and the run that follows (no weights) does not exit 0 (issue 23)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures_run import SpecWriter, finish_run, record_of, start_run


@pytest.mark.training
def test_a_budget_too_small_for_one_epoch_warns_and_the_run_fails(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    spec = write_spec(
        "tiny", epochs=5, budget={"wall_clock": "30s", "reserve": "20s"},
        preflight={"doctor": False, "profile": True}, finish={"action": "none"},
        push={"dir": str(tmp_path / "volume")},
    )  # fmt: skip
    state = tmp_path / "state"
    code, out = finish_run(start_run(spec, state), timeout=400)
    said = "WARN  profile: not even one of your 5 epochs fits in the "
    assert said in out and "left of the 30s wall clock" in out, out
    assert "the run would end with no weights" in out
    record = record_of(state, "tiny")
    assert record["epoch"] == 0, record
    assert code == 1, out[-3000:]
    assert "pushed: nothing: no epoch ended, so there are no weights" in out
    assert "NOTHING VERIFIED" not in out
