"""Names are names: every command that takes a run's NAME accepts only what the spec's `name`
rule accepts, refuses anything else before touching the disk, and `rm` deletes only the job
folder of a run whose record names it (issue 18: `rm ..` once removed the whole state folder)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runspec.spec.runname import NAME
from tests.fixtures_daemon import REPO, runspec_cli

HOSTILE = ["..", ".", "", "/", "a/b", "../runs", "Run", "_x", "done\n", "a" * 64]


def _filled_state(tmp_path: Path) -> tuple[Path, Path]:
    """A state folder with one finished-looking run's files and a bystander folder outside."""
    state = tmp_path / "state"
    (state / "jobs" / "done").mkdir(parents=True)
    (state / "jobs" / "done" / "record.json").write_text("{}")
    (state / "runs" / "done").mkdir(parents=True)
    (state / "runs" / "done" / "weights.pt").write_bytes(b"w")
    bystander = tmp_path / "bystander"
    bystander.mkdir()
    (bystander / "keep.txt").write_text("mine")
    return state, bystander


def _everything(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_the_schema_and_the_commands_share_one_name_rule() -> None:
    schema = json.loads((REPO / "runspec" / "schema" / "runspec.schema.json").read_text())
    assert schema["properties"]["name"]["pattern"] == f"^{NAME.pattern}$"


@pytest.mark.parametrize("command", ["rm", "cancel", "logs", "status"])
def test_a_hostile_name_is_refused_before_the_disk_is_touched(tmp_path: Path, command: str) -> None:
    state, bystander = _filled_state(tmp_path)
    before = _everything(tmp_path)
    for name in [*HOSTILE, str(bystander)]:
        out = runspec_cli(command, name, "--state", str(state), "--json")
        assert out.returncode == 2, (command, name, out.stdout)
        answer = json.loads(out.stdout)
        assert answer["error"] == "usage" and "is not a run's name" in answer["message"]
        assert _everything(tmp_path) == before, (command, name)


def test_rm_of_a_folder_without_a_record_is_no_such_run(tmp_path: Path) -> None:
    state, _ = _filled_state(tmp_path)
    (state / "jobs" / "stray").mkdir()
    (state / "jobs" / "stray" / "notes.txt").write_text("not a run")
    out = runspec_cli("rm", "stray", "--state", str(state))
    assert out.returncode == 2 and "no such run" in out.stderr
    assert (state / "jobs" / "stray" / "notes.txt").exists()


def test_rm_never_follows_a_link_planted_as_a_job_folder(tmp_path: Path) -> None:
    state, bystander = _filled_state(tmp_path)
    (bystander / "record.json").write_text("{}")  # looks like a damaged run through the link
    os.symlink(bystander, state / "jobs" / "planted")
    out = runspec_cli("rm", "planted", "--state", str(state))
    assert out.returncode == 2 and "no such run" in out.stderr
    assert (bystander / "keep.txt").read_text() == "mine"


def test_rm_never_follows_a_linked_jobs_folder(tmp_path: Path) -> None:
    state, bystander = _filled_state(tmp_path)
    (bystander / "done").mkdir()
    (bystander / "done" / "record.json").write_text("{}")
    real_jobs = tmp_path / "real-jobs"
    (state / "jobs").rename(real_jobs)
    os.symlink(bystander, state / "jobs")
    out = runspec_cli("rm", "done", "--state", str(state))
    assert out.returncode == 2 and "no such run" in out.stderr
    assert (bystander / "done" / "record.json").exists()


def test_rm_of_a_damaged_run_still_retires_it(tmp_path: Path) -> None:
    state, bystander = _filled_state(tmp_path)
    out = runspec_cli("rm", "done", "--state", str(state))
    assert out.returncode == 0, out.stderr
    assert not (state / "jobs" / "done").exists()
    # Its run folder is kept, moved out of the name's way (issue 23).
    assert [p.name for p in (state / "runs").glob("done.removed-*/weights.pt")]
    assert (bystander / "keep.txt").exists()
