"""`runspec status`, `logs` and `cancel`, reading and writing the state folder as users would."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from runspec.clock import SYSTEM, parse_utc_iso, utc_iso
from runspec.run.accept import accept
from runspec.spec.loader import load_spec_text
from runspec.store.entries import Fit
from runspec.store.state import PushRecord, RecordStore, RunStatus
from runspec.trainer import control, firststep
from runspec.trainer.control import EpochMarker
from tests.fixtures_daemon import REPO, runspec_cli, spec_text, wait_until


def _accept(state: Path, name: str) -> None:
    accept(load_spec_text(spec_text(name), f"{name}.yaml"), state, {"via": "test"}, SYSTEM)


def _training(state: Path, name: str) -> Path:
    """A run part-way through training, its record as the lifecycle leaves it."""
    _accept(state, name)
    store = RecordStore(state)
    record = store.load(name)
    assert record is not None
    now = SYSTEM.time()
    record.started_at = utc_iso(now - 600)
    record.deadline = utc_iso(now + 3 * 3600)
    record.total_epochs = 100
    record.epoch = 12
    run_dir = state / "runs" / name
    run_dir.mkdir(parents=True)
    record.last_push = PushRecord(epoch=10, time=utc_iso(now - 60), commit=None, files=["a"])
    for status in (RunStatus.PREFLIGHT, RunStatus.STAGING, RunStatus.TRAINING):
        store.transition(record, status, "test")
    return run_dir


def test_status_table_and_json(tmp_path: Path) -> None:
    state = tmp_path / "state"
    run_dir = _training(state, "alpha")
    _accept(state, "beta")
    out = runspec_cli("status", "--state", str(state))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"runspecd: not running ({state})"
    assert lines[1].split() == [
        "NAME",
        "STATE",
        "AGE",
        "EPOCH",
        "ETA",
        "BEST",
        "LAST",
        "PUSH",
        "BUDGET",
        "LEFT",
        "COST",
    ]
    alpha = next(line for line in lines if line.startswith("alpha"))
    assert "training" in alpha and "12/100" in alpha and "epoch 10" in alpha
    assert "2h59m" in alpha or "3h00m" in alpha
    beta = next(line for line in lines if line.startswith("beta"))
    assert "queued" in beta
    assert f"charts for alpha: libreyolo monitor {run_dir} --no-browser" in out.stdout

    out = runspec_cli("status", "alpha", "--state", str(state), "--format", "json")
    rows = json.loads(out.stdout)["runs"]
    assert [r["name"] for r in rows] == ["alpha"]
    assert rows[0]["epoch"] == 12 and rows[0]["last_push"]["epoch"] == 10
    assert 3 * 3600 - 120 < rows[0]["budget_left_seconds"] <= 3 * 3600


def test_status_says_where_the_budget_stops_a_run(tmp_path: Path) -> None:
    """From the planner's own figures in the control folder: the stop time, the next epochs'
    predicted lengths, and when the last epoch ended."""
    state = tmp_path / "state"
    _training(state, "eps")
    control_dir = state / "jobs" / "eps" / "control"
    ended = SYSTEM.time() - 30
    control.write_epoch_marker(
        control_dir, EpochMarker(12, 100, 60.0, False, ended, {})
    )  # fmt: skip
    # Validation every 10 epochs (the spec's default): epoch 20 takes 90 s, the others 60 s;
    # epochs 13 to 19 and 20 fit before the stop time, 21 would not.
    guesses = {"validating": 90.0, "plain": 60.0}
    control.write_deadline(control_dir, ended + 7 * 60 + 90 + 5, guesses)
    out = runspec_cli("status", "--state", str(state))
    assert "eps: the budget stops this run at about epoch 20 of 100" in out.stdout, out.stdout
    rows = json.loads(runspec_cli("status", "--json", "--state", str(state)).stdout)["runs"]
    assert rows[0]["budget_stops_at_epoch"] == 20
    # With room for every epoch it says nothing of the kind.
    control.write_deadline(control_dir, ended + 100 * 90, guesses)
    assert "the budget stops" not in runspec_cli("status", "--state", str(state)).stdout


def test_status_says_the_fitted_schedule_and_the_time_to_the_first_step(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _training(state, "fitted")
    store = RecordStore(state)
    record = store.load("fitted")
    assert record is not None and record.queued_at is not None
    record.fit = Fit(epochs=38, of=100, epoch_s=540.0)
    record.total_epochs = 38
    store.save(record)
    out = runspec_cli("status", "--state", str(state))
    assert "fitted: first training step" not in out.stdout  # none yet: nothing said
    assert "fitted: your 100 epochs do not fit: training 38, the schedule fitted to them" in (
        out.stdout
    )
    # The trainer notes LibreYOLO's start, 4 minutes after the spec arrived.
    firststep.note(state / "jobs" / "fitted" / "control", parse_utc_iso(record.queued_at) + 240)
    out = runspec_cli("status", "--state", str(state))
    assert "fitted: first training step 4m00s after the spec arrived" in out.stdout, out.stdout
    rows = json.loads(runspec_cli("status", "--json", "--state", str(state)).stdout)["runs"]
    assert rows[0]["first_step_seconds"] == 240.0
    assert rows[0]["schedule"].startswith("your 100 epochs do not fit: training 38")


def test_status_watch_redraws_as_the_run_moves_and_ends_on_ctrl_c(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _training(state, "delta")
    proc = subprocess.Popen(
        [sys.executable, "-m", "runspec", "status", "--watch", "--state", str(state)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None and proc.stderr is not None
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(proc.stdout or ()), daemon=True)
    reader.start()

    def screens_with(text: str) -> int:
        return sum(text in line for line in list(seen))

    try:
        wait_until(lambda: screens_with("12/100"), timeout=30, what="the first screen")
        store = RecordStore(state)
        record = store.load("delta")
        assert record is not None
        record.epoch = 13
        store.save(record)
        # A later redraw shows the new epoch, each screen starting with a clear.
        wait_until(lambda: screens_with("13/100"), timeout=30, what="a redraw with epoch 13")
        assert screens_with("\x1b[H\x1b[2J") >= 2
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
    assert code == 130
    assert "Traceback" not in proc.stderr.read()


def test_status_of_an_unknown_run_is_a_usage_error(tmp_path: Path) -> None:
    out = runspec_cli("status", "nope", "--state", str(tmp_path))
    assert out.returncode == 2
    assert "no run named 'nope'" in out.stderr


def _log_files(state: Path, run_dir: Path, name: str) -> tuple[Path, Path]:
    """runspec.log (UTC ISO times) and console.log (LibreYOLO's local times, a traceback with
    none), as a run leaves them."""
    own = state / "jobs" / name / "runspec.log"
    own.write_text(
        "2026-11-30T10:00:00+00:00 preflight: checking this machine\n"
        "2026-11-30T10:00:05+00:00 training: yolo9-t, 100 epochs\n"
        "2026-11-30T10:00:20+00:00 failed: LibreYOLO failed: RuntimeError: boom\n"
    )
    console = run_dir / "console.log"
    console.write_text(
        f"{_local('2026-11-30T10:00:06+00:00')} | INFO     | Starting training\n"
        f"{_local('2026-11-30T10:00:10+00:00')} | WARNING  | No predictions to evaluate\n"
        "Traceback (most recent call last):\n"
        "RuntimeError: boom\n"
    )
    return own, console


def _local(iso: str) -> str:
    """A UTC time as LibreYOLO stamps its lines: local time, to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(parse_utc_iso(iso)))


def test_logs_tells_the_story_in_time_order_with_the_traceback(tmp_path: Path) -> None:
    state = tmp_path / "state"
    run_dir = _training(state, "gamma")
    _log_files(state, run_dir, "gamma")
    (run_dir / "train.log").write_text("the same lines as console.log: not shown twice\n")
    out = runspec_cli("logs", "gamma", "--state", str(state))
    assert out.returncode == 0, out.stderr
    texts = [line.split(" ", 2)[2] for line in out.stdout.splitlines()]
    assert texts == [
        "runspec: preflight: checking this machine",
        "runspec: training: yolo9-t, 100 epochs",
        "train: Starting training",
        "train: WARNING No predictions to evaluate",
        "train: Traceback (most recent call last):",
        "train: RuntimeError: boom",
        "runspec: failed: LibreYOLO failed: RuntimeError: boom",
    ]
    last3 = runspec_cli("logs", "gamma", "-n", "3", "--state", str(state))
    assert last3.stdout.splitlines() == out.stdout.splitlines()[-3:]
    # More lines asked for than the story has: the whole story, nothing dropped.
    more = runspec_cli("logs", "gamma", "-n", "10", "--state", str(state))
    assert more.stdout.splitlines() == out.stdout.splitlines()
    as_json = runspec_cli("logs", "gamma", "-n", "1", "--json", "--state", str(state))
    assert json.loads(as_json.stdout) == {
        "time": "2026-11-30T10:00:20+00:00",
        "source": "runspec",
        "text": "failed: LibreYOLO failed: RuntimeError: boom",
    }
    only = runspec_cli("logs", "gamma", "--training", "--state", str(state))
    assert [line.split(" ", 2)[2] for line in only.stdout.splitlines()] == texts[2:6]


def test_logs_follow_runs_from_preflight_until_the_run_ends(tmp_path: Path) -> None:
    state = tmp_path / "state"
    run_dir = _training(state, "delta")
    own = state / "jobs" / "delta" / "runspec.log"
    own.write_text(f"{utc_iso(SYSTEM.time())} preflight: checking this machine\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "runspec", "logs", "delta", "-f", "--state", str(state)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None
    # runspec's own lines come before training has a folder of its own.
    assert proc.stdout.readline().endswith("runspec: preflight: checking this machine\n")
    console = run_dir / "console.log"
    with console.open("a") as fh:
        fh.write(f"{utc_iso(SYSTEM.time())} runspec.trainer: starting (pid 1)\n")
    assert proc.stdout.readline().endswith("train: runspec.trainer: starting (pid 1)\n")
    store = RecordStore(state)
    record = store.load("delta")
    assert record is not None
    with own.open("a") as fh:
        fh.write(f"{utc_iso(SYSTEM.time())} training completed\n")
    for status in (RunStatus.STOPPING, RunStatus.PUSHING, RunStatus.FINISHED):
        store.transition(record, status, "test")
    assert proc.wait(timeout=30) == 0
    # The tail of the story, then what the run came to: the summary ends a followed run too.
    tail = proc.stdout.read()
    assert "runspec: training completed\n" in tail, tail
    assert tail.index("summary: ") > tail.index("runspec: training completed"), tail


def test_cancel_a_queued_run(tmp_path: Path, make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon = make_daemon()
    _accept(daemon.state, "queued-one")
    out = runspec_cli("cancel", "queued-one", "--state", str(daemon.state))
    assert out.returncode == 0, out.stderr
    assert "removes queued-one from the queue" in out.stdout
    daemon.start("--once")
    assert daemon.wait() == 0
    record = RecordStore(daemon.state).load("queued-one")
    assert record is not None
    assert record.status is RunStatus.FINISHED
    assert record.termination is not None and record.termination.value == "cancelled"
    assert record.started_at is None  # it never left the queue
    assert "queued-one: cancelled while queued" in daemon.output
    out = runspec_cli("cancel", "queued-one", "--state", str(daemon.state))
    assert out.returncode == 2 and "already finished" in out.stderr
