"""`runspec push NAME`: what a finished run left unverified is pushed and verified later,
through the real commands, with no finish applied."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fixtures_run import RUNSPEC, SpecWriter, finish_run, record_of, start_run


@pytest.mark.training
def test_a_run_left_unverified_is_pushed_and_verified_later(
    write_spec: SpecWriter, tmp_path: Path
) -> None:
    pushed = tmp_path / "volume"
    pushed.mkdir()
    blocker = pushed / "later"
    blocker.write_text("not a folder: every push to volume/later fails\n")
    spec = write_spec(
        "later", epochs=1, push={"dir": str(pushed), "every": "1h"},
        budget={"wall_clock": "2m", "overrun": "5s"}, finish={"action": "none"},
    )  # fmt: skip
    state = tmp_path / "state"
    code, out = finish_run(start_run(spec, state), timeout=400)
    assert code == 3, out[-4000:]
    before = record_of(state, "later")
    assert before["last_push"] is None, out[-4000:]

    blocker.unlink()  # the volume is mounted again
    done = subprocess.run(
        [*RUNSPEC, "push", "later", "--state", str(state)],
        check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verified: epoch 1" in done.stdout and "no finish applied" in done.stdout, done.stdout
    record = record_of(state, "later")
    assert record["last_push"]["final"] is True and record["push_error"] is None, record
    manifest = json.loads((pushed / "later" / "runspec" / "manifest.json").read_text())
    assert "weights/last.pt" in {f["path"] for f in manifest["files"]}
    assert (pushed / "later" / "README.md").is_file()
    assert record["finish"] == before["finish"]  # no finish applied by the push

    again = subprocess.run(
        [*RUNSPEC, "push", "nosuch", "--state", str(state)],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert again.returncode == 2 and "no run named 'nosuch'" in again.stderr, again.stderr
