"""A run's name, as a new user meets it: `submit` refuses a taken name at once (instead of the
daemon rejecting it later while the user waits), `runspec rm` frees it, provenance is right for
a spec anywhere in a repository, and `runspec cancel` stops a run driven by `runspec run`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runspec.clock import SYSTEM
from runspec.run.accept import accept
from runspec.spec.loader import load_spec_text
from runspec.store.state import RecordStore, RunStatus, Termination
from tests.fixtures_daemon import REPO, spec_text
from tests.fixtures_run import SpecWriter, finish_run, record_of, start_run, wait_record


def runspec(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runspec", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        check=False,
    )


def finished(state: Path, name: str, text: str) -> None:
    accept(load_spec_text(text, f"{name}.yaml"), state, None, SYSTEM)
    store = RecordStore(state)
    record = store.load(name)
    assert record is not None
    store.transition(record, RunStatus.FINISHED, "test", Termination.COMPLETED)


def test_submit_refuses_a_finished_name_and_rm_frees_it(tmp_path: Path) -> None:
    state, inbox = tmp_path / "state", tmp_path / "state" / "inbox"
    finished(state, "done", spec_text("done"))
    (state / "runs" / "done").mkdir(parents=True)
    (state / "runs" / "done" / "weights.pt").write_bytes(b"the old run's weights")
    inbox.mkdir(parents=True)
    spec = tmp_path / "done.yaml"
    spec.write_text(spec_text("done"))

    refused = runspec("submit", str(spec), "--state", str(state))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "run 'done' already finished (completed)" in refused.stderr
    assert f"`runspec rm done --state {state}`" in refused.stderr  # pasteable as printed
    assert list(inbox.iterdir()) == []  # nothing reached the inbox

    other = tmp_path / "other.yaml"
    other.write_text(spec_text("done").replace("epochs: 2", "epochs: 3"))
    taken = runspec("submit", str(other), "--state", str(state))
    assert taken.returncode == 2 and "already exists with another spec" in taken.stderr

    removed = runspec("rm", "done", "--state", str(state))
    assert removed.returncode == 0, removed.stderr
    assert not (state / "jobs" / "done").exists()
    # The weights stay unless asked, out of the name's way: the name is free at once.
    [aside] = (state / "runs").glob("done.removed-*")
    assert (aside / "weights.pt").read_bytes() == b"the old run's weights"
    assert f"kept its run folder as {aside}; the name done is free" in removed.stdout

    again = runspec("submit", str(spec), "--state", str(state))
    assert again.returncode == 0, again.stdout + again.stderr
    assert (inbox / "done.yaml").exists()
    (inbox / "done.yaml").unlink()
    assert runspec("rm", "done", "--state", str(state)).returncode == 2  # gone already
    (state / "jobs" / "done").mkdir()
    (state / "jobs" / "done" / "record.json").write_text("{}")  # damaged: rm is the fix
    (state / "runs" / "done").mkdir()
    (state / "runs" / "done" / "last.pt").write_bytes(b"weights")
    assert runspec("rm", "done", "--state", str(state), "--run-folder").returncode == 0
    assert not (state / "runs" / "done").exists()
    assert aside.exists()  # a folder set aside earlier is no longer the run's: it stays
    assert runspec("submit", str(spec), "--state", str(state)).returncode == 0
    assert (inbox / "done.yaml").exists()


def test_rm_clears_a_rejected_inbox_entry_by_its_file_name(tmp_path: Path) -> None:
    state = tmp_path / "state"
    rejected = state / "inbox" / "rejected"
    rejected.mkdir(parents=True)
    (rejected / "typo.yaml").write_text("runspec: 1\nnmae: x\n")
    (rejected / "typo.yaml.error").write_text("typo.yaml:2:1: unknown key 'nmae'\n")
    (rejected / "other.yaml").write_text("kept")
    out = runspec("rm", "typo.yaml", "--state", str(state))
    assert out.returncode == 0, out.stderr
    assert "removed the rejected inbox entry typo.yaml" in out.stdout
    assert sorted(p.name for p in rejected.iterdir()) == ["other.yaml"]
    missing = runspec("rm", "typo.yaml", "--state", str(state))
    assert missing.returncode == 2
    assert "nor a rejected inbox entry of that name" in missing.stderr
    # Only ever a file in rejected/ itself.
    outside = runspec("rm", "../rejected/other.yaml", "--state", str(state))
    assert outside.returncode == 2 and (rejected / "other.yaml").exists()


def test_rm_refuses_a_run_that_has_not_finished(tmp_path: Path) -> None:
    state = tmp_path / "state"
    accept(load_spec_text(spec_text("busy"), "busy.yaml"), state, None, SYSTEM)
    out = runspec("rm", "busy", "--state", str(state))
    assert out.returncode == 2 and "runspec cancel busy" in out.stderr
    assert (state / "jobs" / "busy" / "record.json").exists()


def test_provenance_of_an_edited_spec_in_a_subfolder(tmp_path: Path) -> None:
    repo = tmp_path / "experiments"
    (repo / "specs" / "yolo").mkdir(parents=True)
    for args in (
        ("init", "-q"),
        ("config", "user.email", "t@example.invalid"),
        ("config", "user.name", "t"),
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    spec = repo / "specs" / "yolo" / "sub.yaml"
    spec.write_text(spec_text("sub"))
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True, capture_output=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "x"], check=True, capture_output=True)
    spec.write_text(spec_text("sub").replace("epochs: 2", "epochs: 4"))  # edited, not committed
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    out = runspec("submit", str(spec), "--inbox", str(inbox), "--json", cwd=spec.parent)
    assert out.returncode == 0, out.stderr
    git = json.loads(out.stdout)["git"]
    assert git["path"] == "specs/yolo/sub.yaml"
    assert git["spec_tracked"] is True and git["spec_modified"] is True


@pytest.mark.training
@pytest.mark.timeout(600)
def test_cancel_stops_a_run_driven_by_runspec_run(tmp_path: Path, write_spec: SpecWriter) -> None:
    ran = tmp_path / "finish-ran"
    spec = write_spec(
        "cancelme",
        epochs=50,
        push={"dir": str(tmp_path / "volume")},
        preflight={"doctor": False, "disk": "600MB"},
        finish={"action": "command", "command": ["touch", str(ran)]},
    )
    state = tmp_path / "state"
    proc = start_run(spec, state)
    wait_record(state, "cancelme", lambda r: r.get("epoch", 0) >= 1, 300)
    out = runspec("cancel", "cancelme", "--state", str(state))
    assert out.returncode == 0, out.stderr
    assert f"cancel requested: pid {proc.pid} (runspec run" in out.stdout
    code, printed = finish_run(proc, timeout=300)
    record = record_of(state, "cancelme")
    assert record["termination"] == "cancelled", printed
    assert record["epoch"] < 50
    assert record["last_push"]["final"] is True
    assert not ran.exists()  # a cancel keeps the machine: no finish
    assert code == 1
