"""`runspec push NAME`: what a finished run left unverified is pushed and verified later,
through the real commands and the local Hub server; a finish only with `--finish`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from runspec.store.state import RunRecord, unnamed_edges
from tests.fixtures_run import RUNSPEC, SpecWriter, finish_run, record_of, start_run
from tests.hubserver import HubServer


def _push(state: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [*RUNSPEC, "push", *extra, "--state", str(state)],
        env={**os.environ, **env}, check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.training
def test_a_run_left_unverified_is_pushed_and_verified_later(
    hub_server: HubServer, hub_env: dict[str, str], write_spec: SpecWriter, tmp_path: Path
) -> None:
    marker = tmp_path / "finished"  # what the spec's finish command leaves
    spec = write_spec(
        "later", epochs=1, push={"hub": {"repo": "me/later"}, "every": "1h"},
        # One epoch fits with room to spare even on a loaded machine (tests/test_run_budget.py
        # trains two in these 75 s); the final push then fails until the overrun is spent.
        budget={"wall_clock": "75s", "reserve": "10s", "overrun": "5s"},
        finish={"action": "command", "command": ["touch", str(marker)], "unverified": "keep"},
    )  # fmt: skip
    state = tmp_path / "state"
    hub_server.fail("commit", "500", times=100_000)  # a Hub outage through the whole run
    code, out = finish_run(start_run(spec, state, hub_env), timeout=400)
    assert code == 3, out[-4000:]
    assert not marker.exists(), out[-4000:]  # unverified: its choice is keep
    before = record_of(state, "later")
    assert before["last_push"] is None, out[-4000:]

    hub_server.clear_faults()  # the outage is over
    done = _push(state, hub_env, "later")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verified: epoch 1" in done.stdout and "no finish applied" in done.stdout, done.stdout
    record = record_of(state, "later")
    assert record["last_push"]["final"] is True and record["push_error"] is None, record
    files = hub_server.files("me/later")
    assert "weights/last.pt" in files and "README.md" in files, files
    pushed = json.loads(hub_server.entry("me/later", "runspec/record.json").data or b"{}")
    assert pushed["name"] == "later" and pushed["push"]["final"] is True, pushed
    assert record["finish"] == before["finish"] and not marker.exists()  # no finish applied

    # Asked for, the finish goes through the run's own gate: verified now, so it is applied.
    done = _push(state, hub_env, "later", "--finish")
    assert done.returncode == 0, done.stdout + done.stderr
    assert marker.exists(), done.stdout + done.stderr
    finished = record_of(state, "later")
    assert finished["status"] == "finished"
    # Back to its finish by the table's named move, and every other move the table's too.
    assert [h.get("via") for h in finished["history"][-2:]] == ["refinish", None]
    assert unnamed_edges(RunRecord.from_json(finished).history) == [], finished["history"]

    again = _push(state, hub_env, "nosuch")
    assert again.returncode == 2 and "no run named 'nosuch'" in again.stderr, again.stderr
