"""What a new user met in `runspec status` and `rm` (issue 38), on a state folder and inbox laid
out as the daemon leaves them: where a rejected spec's whole error is and the rm that takes
its path, the inbox files the daemon ignores, one JSON object with the daemon's state and one
reason per run, and the lease after a resume."""

from __future__ import annotations

import json
from pathlib import Path

from runspec.clock import SYSTEM, utc_iso
from runspec.run.accept import accept
from runspec.spec.loader import load_spec_text
from runspec.store.paths import StateLayout
from runspec.store.state import HistoryEntry, RecordStore, RunStatus, Termination
from tests.fixtures_daemon import runspec_cli, spec_text


def _inbox(tmp_path: Path) -> tuple[Path, Path]:
    state = tmp_path / "state"
    inbox = state / "inbox"
    (inbox / "rejected").mkdir(parents=True)
    return state, inbox


def test_a_rejected_spec_says_where_its_whole_error_is_and_rm_takes_that_path(
    tmp_path: Path,
) -> None:
    state, inbox = _inbox(tmp_path)
    spec = inbox / "rejected" / "bad.yaml"
    spec.write_text("name: bad\n")
    (inbox / "rejected" / "bad.yaml.error").write_text(
        "bad.yaml:1:1: /runspec: required key missing\nbad.yaml:1:1: /train: required\n"
    )
    out = runspec_cli("status", "--state", str(state))
    assert out.returncode == 0, out.stderr
    assert "bad.yaml: rejected at " in out.stdout and "(and 1 more)" in out.stdout
    clear = f"runspec rm {spec} --state {state}"
    assert f"bad.yaml: the whole error is in {spec}.error; `{clear}` clears it" in out.stdout
    shown = json.loads(runspec_cli("status", "--json", "--state", str(state)).stdout)
    assert shown["runs"][0]["clear"] == f"`{clear}` clears it"

    gone = runspec_cli(*clear.split()[1:])
    assert gone.returncode == 0, gone.stderr
    assert not spec.exists() and not Path(f"{spec}.error").exists()
    # A path outside rejected/ is never rm's to delete.
    elsewhere = tmp_path / "keep.yaml"
    elsewhere.write_text("name: keep\n")
    refused = runspec_cli("rm", str(elsewhere), "--state", str(state))
    assert refused.returncode == 2 and "nor in the inbox's rejected folder" in refused.stderr
    assert elsewhere.exists()


def test_inbox_files_the_daemon_ignores_are_said(tmp_path: Path) -> None:
    state, inbox = _inbox(tmp_path)
    (inbox / "run.json").write_text("{}")
    (inbox / "notes.txt").write_text("")
    (inbox / ".partial.yaml").write_text("")  # a writer's temporary file: not news
    (inbox / "waiting.yaml").write_text("name: waiting\n")
    out = runspec_cli("status", "--state", str(state))
    assert out.returncode == 0, out.stderr
    assert "inbox: 2 file(s) the daemon ignores" in out.stdout
    assert "only .yaml and .yml files are specs: notes.txt, run.json" in out.stdout
    shown = json.loads(runspec_cli("status", "--json", "--state", str(state)).stdout)
    assert shown["inbox"] == {"folder": str(inbox), "ignored": ["notes.txt", "run.json"]}


def test_status_json_is_one_object_with_the_daemons_state_and_one_reason_per_run(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    accept(load_spec_text(spec_text("gone"), "gone.yaml"), state, {"via": "test"}, SYSTEM)
    store = RecordStore(state)
    record = store.load("gone")
    assert record is not None
    store.transition(record, RunStatus.PREFLIGHT, "started")
    why = "the dataset path /nonexistent/data.yaml does not exist"
    store.transition(record, RunStatus.PUSHING, why, Termination.FAILED_PREFLIGHT)
    store.transition(record, RunStatus.FINISHING, "final push verified")
    store.transition(record, RunStatus.FINISHED, "finish: none")
    out = runspec_cli("status", "-a", "--json", "--state", str(state))
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    assert shown["state"] == str(state)
    assert shown["daemon"] == {"running": False, "held_by": None}
    (row,) = shown["runs"]
    assert row["reason"] == why  # why it ended, not its last step ("finish: none")
    assert "why" not in row


def test_status_after_a_resume_shows_no_lease_of_the_attempt_before_as_current(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    accept(load_spec_text(spec_text("again"), "again.yaml"), state, {"via": "test"}, SYSTEM)
    store = RecordStore(state)
    record = store.load("again")
    assert record is not None
    now = SYSTEM.time()
    record.status = RunStatus.TRAINING  # as run.resume leaves it
    record.history.append(HistoryEntry(utc_iso(now - 60), "finished", "training", "resumed"))
    store.save(record)
    lease = StateLayout(state).run_paths("again").lease_file
    closed = {"state": "finished", "renewed_at": utc_iso(now - 3600), "final_verified": True}
    lease.write_text(json.dumps(closed))
    out = runspec_cli("status", "--state", str(state))
    assert out.returncode == 0, out.stderr
    assert f"again: lease not yet renewed since the resume at {utc_iso(now - 60)}" in out.stdout
    assert "(the attempt before's: lease closed at" in out.stdout
    # Once the resumed run's renewer writes it, that lease is the one shown.
    fresh = {"vouched_until": utc_iso(now + 600), "renewed_at": utc_iso(now - 5)}
    lease.write_text(json.dumps(fresh))
    out = runspec_cli("status", "--state", str(state))
    assert f"again: lease vouched until {utc_iso(now + 600)}" in out.stdout
    assert "attempt before" not in out.stdout
