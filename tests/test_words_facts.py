"""The words match the facts: what `runspec status`, `submit` and the hints say, through the
real commands (issue 23's "the words match the facts")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from runspec.identity import ProcessIdentity
from runspec.run.accept import accept
from runspec.spec.loader import load_spec
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore, RunStatus, Termination
from tests.fixtures_daemon import end_leftovers, wait_until
from tests.fixtures_run import SpecWriter, finish_run, start_run, wait_record
from tests.test_machine_safety import ended, push_final, pushed, trained

RUNSPEC = [sys.executable, "-m", "runspec"]


def _runspec(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNSPEC, *args], capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_a_run_nobody_drives_says_so_with_no_eta_and_a_cost_that_stands(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = tmp_path / "state"
    spec_file = write_spec("orphan", epochs=40)
    spec = load_spec(spec_file)
    accept(spec, state, {"via": "runspec run", "source_path": str(spec_file)})
    store = RecordStore(state)
    record = store.load("orphan")
    assert record is not None
    record.started_at = "2026-01-01T00:00:00+00:00"  # long ago: a climbing cost would show
    record.deadline = "2099-01-01T00:00:00+00:00"
    for status in (RunStatus.PREFLIGHT, RunStatus.STAGING, RunStatus.TRAINING):
        store.transition(record, status, "test")
    trained(StateLayout(state).run_paths("orphan"), 1)
    out = _runspec("status", "--state", str(state))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert (
        f"orphan: nobody drives this run: runspec run {spec_file} --resume --state {state} "
        "or start runspecd"
    ) in text, text
    row = next(line for line in text.splitlines() if line.startswith("orphan "))
    assert " ETA" not in row and "$" not in row, row  # no ETA, no cost it never ran up here


def test_submit_of_a_taken_name_is_a_refusal_exit_2(tmp_path: Path, write_spec: SpecWriter) -> None:
    state = tmp_path / "state"
    (state / "inbox").mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    spec_file = write_spec("taken")
    accept(load_spec(spec_file), state)
    ended(RecordStore(state), "taken", Termination.COMPLETED)
    out = _runspec("submit", str(spec_file), "--state", str(state))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "already finished" in out.stderr


def test_runspec_state_sets_the_state_folder_and_hints_carry_state_otherwise(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = tmp_path / "state"
    (state / "inbox").mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    spec_file = write_spec("hinted")
    out = _runspec("submit", str(spec_file), "--state", str(state))
    assert out.returncode == 0, out.stderr
    assert f"runspec status hinted --state {state}" in out.stdout, out.stdout
    # With RUNSPEC_STATE naming it, the bare hint works as printed.
    env = {"RUNSPEC_STATE": str(state)}
    status = _runspec("status", env=env)
    assert "hinted" in status.stdout and str(state) in status.stdout, status.stdout
    (state / "inbox" / "hinted.yaml").unlink()
    again = _runspec("submit", str(spec_file), env=env)
    assert again.returncode == 0, again.stderr
    assert "runspec status hinted " in again.stdout and "--state" not in again.stdout


def test_run_says_the_failsafe_it_leaves_armed_and_how_to_disarm_it(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    spec = write_spec("armed", epochs=50, finish={"action": "none"})
    state = tmp_path / "state"
    paths = StateLayout(state).run_paths("armed")
    proc = start_run(spec, state)
    try:
        wait_record(state, "armed", lambda r: r["status"] == "training", timeout=120)
        proc.send_signal(signal.SIGINT)
        # Two signals before Python's handler runs count as one: the second comes once the
        # first has asked the trainer to stop, while it trains on to the epoch's end.
        wait_until((paths.control_dir / "stop").exists, 60, "the first signal's stop")
        proc.send_signal(signal.SIGINT)  # the second: exit now, the run left unfinished
        _, out = finish_run(proc, timeout=300)
        ident = ProcessIdentity.from_json(json.loads(paths.failsafe_watch.read_text()))
        assert ident.alive()
        assert (
            f"failsafe: left armed: watcher pid {ident.pid} applies nothing to the machine" in out
        ), out[-3000:]
        assert f"to disarm it: kill {ident.pid}" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        end_leftovers(state)  # the watcher, and the trainer training on to its epoch's end


def test_status_and_logs_of_a_finished_run_give_its_summary(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = tmp_path / "state"
    volume = tmp_path / "volume"
    accept(load_spec(write_spec("done", push={"dir": str(volume)})), state)
    trained(StateLayout(state).run_paths("done"), 3)
    pushed(RecordStore(state), "done", Termination.COMPLETED)
    push_final(state, "done")
    store = RecordStore(state)
    record = store.load("done")
    assert record is not None
    store.transition(record, RunStatus.FINISHED, "test")
    status = _runspec("status", "done", "--state", str(state))
    assert "summary: completed at epoch" in status.stdout, status.stdout
    assert f"to dir {volume / 'done'}" in status.stdout
    assert "finish:" in status.stdout or "time:" in status.stdout
    logs = _runspec("logs", "done", "--state", str(state))
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.rstrip().splitlines()[-1].startswith("  "), logs.stdout
    assert "summary: completed at epoch" in logs.stdout
