"""Every `runspec ...` hint works when pasted: with `--state` when the state folder is not the
default (issue 23's "hints carry the state folder"), through the real commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from runspec.run.accept import accept
from runspec.spec.loader import load_spec
from runspec.store.locks import FileLock
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore, RunStatus, Termination
from tests.fixtures_run import SpecWriter
from tests.test_machine_safety import ended

RUNSPEC = [sys.executable, "-m", "runspec"]


def _runspec(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RUNSPEC_STATE"}
    return subprocess.run(
        [*RUNSPEC, *args], capture_output=True, text=True, timeout=120, check=False, env=env
    )


def _state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    (state / "inbox").mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    return state


def test_status_and_submit_hints_name_the_state_folder(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = _state(tmp_path)
    spec_file = write_spec("old")
    accept(load_spec(spec_file), state)
    ended(RecordStore(state), "old", Termination.COMPLETED)
    status = _runspec("status", "--state", str(state))
    assert status.returncode == 0, status.stderr
    assert f"(1 finished: runspec status -a --state {state} shows them)" in status.stdout
    taken = _runspec("submit", str(spec_file), "--state", str(state))
    assert taken.returncode == 2, taken.stdout + taken.stderr
    assert f"`runspec rm old --state {state}` the old one" in taken.stderr, taken.stderr


def test_rm_push_and_a_damaged_record_hint_with_the_state_folder(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = _state(tmp_path)
    spec_file = write_spec("busy")
    record = accept(load_spec(spec_file), state)
    store = RecordStore(state)
    store.transition(record, RunStatus.PREFLIGHT, "test")
    rm = _runspec("rm", "busy", "--state", str(state))
    assert rm.returncode == 2, rm.stdout + rm.stderr
    assert f"`runspec cancel busy --state {state}`" in rm.stderr, rm.stderr
    store.transition(record, RunStatus.FINISHED, "test", Termination.INTERRUPTED)
    # Someone drives it: push names the driver and how to follow or stop it.
    lock = FileLock(StateLayout(state).run_paths("busy").owner_lock)
    assert lock.try_acquire() is None
    try:
        push = _runspec("push", "busy", "--state", str(state))
    finally:
        lock.release()
    assert push.returncode == 2, push.stdout + push.stderr
    assert f"`runspec status busy --state {state}`" in push.stderr, push.stderr
    assert f"`runspec cancel busy --state {state}`" in push.stderr, push.stderr
    # A damaged record: status says how to clear it, in a command that works as printed.
    (StateLayout(state).job_dir("busy") / "record.json").write_text("{not json")
    shown = _runspec("status", "--json", "--state", str(state))
    assert shown.returncode == 0, shown.stderr
    (row,) = [r for r in json.loads(shown.stdout)["runs"] if r["name"] == "busy"]
    assert row["fix"] == f"look at the kept record, then `runspec rm busy --state {state}`"


def test_status_all_lists_newest_first_with_age_and_best_metric(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = _state(tmp_path)
    store = RecordStore(state)
    for name, queued, metric in (("older", "2026-01-01", 0.125), ("newer", "2026-01-03", 0.5)):
        record = accept(load_spec(write_spec(name)), state)
        record.queued_at = f"{queued}T00:00:00+00:00"
        store.save(record)
        ended(store, name, Termination.COMPLETED)
        run_dir = StateLayout(state).run_paths(name).run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        row = {"epoch": 3, "best_metric": metric, "best_metric_name": "metrics/mAP50-95"}
        (run_dir / "metrics.jsonl").write_text(json.dumps(row) + "\n")
    out = _runspec("status", "-a", "--state", str(state))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = next(line for line in lines if line.startswith("NAME"))
    assert header.split()[:3] == ["NAME", "STATE", "AGE"], header
    rows = [line for line in lines if line.startswith(("older ", "newer "))]
    assert [r.split()[0] for r in rows] == ["newer", "older"], out.stdout
    assert "0.5000" in rows[0] and "0.1250" in rows[1], out.stdout
    # The AGE column: both arrived long ago (days, not "-").
    ages = [r[header.index("AGE") :].split()[0] for r in rows]
    assert all(a != "-" and a[0].isdigit() for a in ages), ages
