"""`runspec submit`: validation, git provenance, an atomic copy the daemon picks up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures_daemon import REPO, DaemonProc, spec_text, wait_until


def _run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), capture_output=True, text=True, timeout=60, cwd=cwd, check=False
    )


def _git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "experiments"
    (repo / "specs").mkdir(parents=True)
    _run("git", "init", "-q", str(repo))
    _run("git", "-C", str(repo), "config", "user.email", "t@example.invalid")
    _run("git", "-C", str(repo), "config", "user.name", "t")
    _run(
        "git",
        "-C",
        str(repo),
        "remote",
        "add",
        "origin",
        "https://me:hf_secret@example.invalid/x.git",
    )
    return repo


def test_submit_records_git_provenance_and_the_daemon_keeps_it(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = _git_repo(tmp_path)
    spec = repo / "specs" / "run1.yaml"
    spec.write_text(spec_text("run1"))
    _run("git", "-C", str(repo), "add", ".")
    _run("git", "-C", str(repo), "commit", "-qm", "run1")
    commit = _run("git", "-C", str(repo), "rev-parse", "HEAD").stdout.strip()
    (repo / "notes.txt").write_text("uncommitted\n")  # the tree is dirty, the spec is not

    daemon: DaemonProc = make_daemon()
    out = _run(sys.executable, "-m", "runspec", "submit", str(spec), "--inbox", str(daemon.inbox))
    assert out.returncode == 0, out.stderr
    assert f"submitted run1 from specs/run1.yaml at {commit[:12]} (dirty tree)" in out.stdout
    assert spec.read_text() == spec_text("run1")  # the user's file stays
    assert (daemon.inbox / "run1.yaml").read_text() == spec_text("run1")

    daemon.start()
    daemon.wait_ready()
    provenance_file = daemon.state / "jobs" / "run1" / "provenance.json"
    wait_until(provenance_file.exists, what="the accepted run's provenance")
    provenance = json.loads(provenance_file.read_text())
    assert provenance["via"] == "runspec submit"
    assert provenance["git"]["commit"] == commit
    assert provenance["git"]["path"] == "specs/run1.yaml"
    assert provenance["git"]["dirty"] is True
    assert provenance["git"]["spec_modified"] is False
    assert provenance["source_path"] == str(spec)
    assert "hf_secret" not in provenance_file.read_text()
    assert not list(daemon.inbox.glob(".*provenance*"))


def test_submit_outside_git_and_twice(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    spec = tmp_path / "plain.yaml"
    spec.write_text(spec_text("plain"))
    out = _run(
        sys.executable, "-m", "runspec", "submit", str(spec), "--inbox", str(inbox), "--json"
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["submitted"] is True and "git" not in result
    again = _run(sys.executable, "-m", "runspec", "submit", str(spec), "--inbox", str(inbox))
    assert again.returncode == 2
    assert "already waiting in the inbox" in again.stderr


def test_submit_refuses_an_invalid_spec(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    spec = tmp_path / "bad.yaml"
    spec.write_text(spec_text("bad").replace("epochs: 2", "epochs: zero"))
    out = _run(sys.executable, "-m", "runspec", "submit", str(spec), "--inbox", str(inbox))
    assert out.returncode == 2  # an invalid spec: the same code from every command
    assert f"{spec}:7:11: /train/epochs:" in out.stdout
    assert list(inbox.iterdir()) == []


def test_submit_of_dev_zero_is_refused_at_once(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "runspec", "submit", "/dev/zero", "--inbox", str(inbox)],
        capture_output=True,
        text=True,
        timeout=20,  # reading /dev/zero would never end (or end the machine's memory)
        cwd=REPO,
        check=False,
    )
    assert out.returncode == 2
    assert "cannot read /dev/zero: a character device, not a regular file" in out.stderr
    assert list(inbox.iterdir()) == []


def test_submit_of_a_fifo_does_not_wait_for_a_writer(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    out = subprocess.run(
        [sys.executable, "-m", "runspec", "submit", str(fifo), "--inbox", str(inbox)],
        capture_output=True,
        text=True,
        timeout=20,  # opening a FIFO for reading waits for a writer that never comes
        cwd=REPO,
        check=False,
    )
    assert out.returncode == 2
    assert f"cannot read {fifo}: a FIFO (named pipe), not a regular file" in out.stderr
    assert list(inbox.iterdir()) == []


def test_submit_of_a_file_past_the_limit_reads_no_further(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    big = tmp_path / "big.yaml"
    with big.open("wb") as fh:
        fh.truncate(1 << 30)  # sparse
    out = _run(sys.executable, "-m", "runspec", "submit", str(big), "--inbox", str(inbox))
    assert out.returncode == 2
    assert f"{big}:1:1: the file is 1,073,741,824 bytes; a spec may be at most 1 MiB" in (
        out.stdout
    )
    assert list(inbox.iterdir()) == []


def test_submit_with_no_daemon_running_says_so_and_its_hints_work(tmp_path: Path) -> None:
    """Nothing picks the spec up until a daemon runs: submit says so and names how to start
    one, instead of suggesting `logs` and `cancel`, which would answer "no run named"."""
    state = tmp_path / "state"
    (state / "inbox").mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    spec = tmp_path / "lonely.yaml"
    spec.write_text(spec_text("lonely"))
    out = _run(sys.executable, "-m", "runspec", "submit", str(spec), "--state", str(state))
    assert out.returncode == 0, out.stderr
    assert "no daemon is running on" in out.stdout
    assert "runspec daemon --detach" in out.stdout and "systemctl start runspecd" in out.stdout
    assert "logs lonely" not in out.stdout
    # The hint it gives instead works now: the spec is shown waiting in the inbox.
    status = _run(sys.executable, "-m", "runspec", "status", "lonely", "--state", str(state))
    assert status.returncode == 0, status.stderr
    assert "lonely.yaml" in status.stdout and "waiting" in status.stdout
    mistyped = _run(sys.executable, "-m", "runspec", "status", "--state", str(state) + "x")
    assert mistyped.returncode == 2 and "no state folder" in mistyped.stderr
    as_json = _run(
        sys.executable, "-m", "runspec", "submit", "--json", str(spec), "--state", str(state)
    )
    assert as_json.returncode == 2  # already waiting
    (state / "inbox" / "lonely.yaml").unlink()
    as_json = _run(
        sys.executable, "-m", "runspec", "submit", "--json", str(spec), "--state", str(state)
    )
    assert json.loads(as_json.stdout)["daemon_running"] is False


def test_submitting_a_spec_already_under_way_says_so(tmp_path: Path) -> None:
    from runspec.run.accept import accept
    from runspec.spec.loader import load_spec

    state = tmp_path / "state"
    (state / "inbox").mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    spec = tmp_path / "busy.yaml"
    spec.write_text(spec_text("busy"))
    accept(load_spec(spec), state)  # queued: as the daemon took it
    out = _run(sys.executable, "-m", "runspec", "submit", str(spec), "--state", str(state))
    assert out.returncode == 2
    assert "busy is already under way (queued): nothing submitted" in out.stderr
    assert f"runspec status busy --state {state}" in out.stderr
    assert not (state / "inbox" / "busy.yaml").exists()
