"""Every stop can be continued: `runspec run SPEC --resume`, here and on a fresh disk, through
the real command, with a tiny real training and the local Hub server."""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runspec.clock import parse_utc_iso
from runspec.store.paths import StateLayout
from runspec.store.state import RunRecord, unnamed_edges
from runspec.trainer.launcher import TrainerHandle
from tests.fixtures_daemon import DaemonProc, end_leftovers, runspec_cli
from tests.fixtures_run import SpecWriter, finish_run, record_of, start_run, wait_record
from tests.hubserver import HubServer


def _hub_spec(write_spec: SpecWriter, name: str, epochs: int) -> Path:
    # save_period 1: a push that copies last.pt while LibreYOLO rewrites it leaves it for the
    # next push; that epoch's epoch_N.pt is then the checkpoint at the Hub.
    return write_spec(
        name, epochs=epochs, push={"hub": {"repo": f"me/{name}"}, "every": "1h"},
        train={"save_period": 1}, finish={"action": "none"},
    )  # fmt: skip


def _pushed_record(hub_server: HubServer, repo: str) -> dict[str, object]:
    entry = hub_server.repo(repo).head["runspec/record.json"]
    assert entry.data is not None
    data: dict[str, object] = json.loads(entry.data)
    return data


@pytest.mark.training
def test_a_killed_run_resumes_on_a_fresh_disk_from_the_hub_inside_its_first_budget(
    hub_server: HubServer,
    hub_env: dict[str, str],
    write_spec: SpecWriter,
    tmp_path: Path,
) -> None:
    """By hand, `--resume --keep-budget` on a fresh machine. An engine's retry (the same task
    id, `runspec run` with no flag) makes the same facts true by itself: see
    test_engine_lifecycle.py's HF Jobs retry and test_resume_recordless.py's SkyPilot one."""
    spec = _hub_spec(write_spec, "spans", 4)
    first, second = tmp_path / "machine1", tmp_path / "machine2"
    env = hub_env
    proc = start_run(spec, first, env)
    try:
        # The first verified push (epoch 1 or later) is on the Hub: then the machine dies.
        wait_record(first, "spans", lambda r: (r.get("last_push") or {}).get("epoch"), 300)
        # ... and the first card after it (the repo's `runspec` tag), in a commit of its own.
        end = time.monotonic() + 60
        while "README.md" not in hub_server.repo("me/spans").head and time.monotonic() < end:
            time.sleep(0.2)
        handle = TrainerHandle.find(StateLayout(first).run_paths("spans"))
        proc.send_signal(signal.SIGKILL)
        assert handle is not None
        handle.kill_now()
        proc.wait(30)
        # Every push carries the run's record: a live run's, with its budget start.
        pushed = _pushed_record(hub_server, "me/spans")
        assert pushed["name"] == "spans" and pushed["status"] == "training", pushed
        assert pushed["budget_started_at"] and pushed["checkpoint"], pushed
        card = hub_server.repo("me/spans").head["README.md"].data or b""
        assert b"- runspec" in card, card[:400]
        one = record_of(first, "spans")
        deadline = parse_utc_iso(one["deadline"])

        proc = start_run(spec, second, env, "--resume", "--keep-budget")
        code, out = finish_run(proc, timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        end_leftovers(first)
        end_leftovers(second)
    assert code == 0, out[-4000:]
    said = re.search(r"resuming from (last|best|epoch_\d+)\.pt \(hub me/spans\)", out)
    assert said is not None, out[:4000]
    assert "the budget left is" in out, out[:4000]
    two = record_of(second, "spans")
    assert two["termination"] == "completed", out[-4000:]
    assert two["epoch"] == 4 and two["resumes"] == 1, two
    # It went on past epoch 1, never again from epoch 0.
    assert "epoch 1/4" not in out, out[-4000:]
    assert "epoch 4/4" in out, out[-4000:]
    # Inside the first attempt's budget: the same deadline, and it ended before it.
    assert two["deadline"] == one["deadline"], (one["deadline"], two["deadline"])
    assert parse_utc_iso(two["ended_at"]) <= deadline
    # The first attempt's story came with it.
    assert any(h["to"] == "training" for h in two["history"][: len(one["history"])])
    # Every status change on both machines went through the transition table (issue 38).
    assert unnamed_edges(RunRecord.from_json(two).history) == [], two["history"]
    assert [h.get("via") for h in two["history"]].count("resume") == 1, two["history"]
    assert _pushed_record(hub_server, "me/spans")["termination"] == "completed"


@pytest.mark.training
def test_an_interrupted_run_resumes_here_and_a_cancelled_one_through_the_daemon_each_anew(
    write_spec: SpecWriter, tmp_path: Path, make_daemon: Callable[..., DaemonProc],
    daemon_dirs: tuple[Path, Path],
) -> None:  # fmt: skip
    """One run, stopped twice: interrupted (SIGINT) and resumed here with `--resume`, then
    cancelled and resumed through the daemon with `submit --resume`; each resume takes a new
    budget, said in one line, and goes on from where the run stopped."""
    state, inbox = daemon_dirs
    spec = write_spec(
        "again", epochs=7, push={"dir": str(tmp_path / "pushed"), "every": "1h"},
        finish={"action": "none"},
    )  # fmt: skip
    proc = start_run(spec, state)
    try:
        wait_record(state, "again", lambda r: r.get("epoch", 0) >= 1, 300)
        proc.send_signal(signal.SIGINT)
        _, out = finish_run(proc, timeout=300)
        one = record_of(state, "again")
        assert one["termination"] == "interrupted", out[-4000:]
        proc = start_run(spec, state, None, "--resume")
        wait_record(state, "again", lambda r: r.get("epoch", 0) > one["epoch"], 300)
        done = runspec_cli("cancel", "again", "--state", str(state))
        assert done.returncode == 0, done.stdout + done.stderr
        _, out = finish_run(proc, timeout=300)
        two = record_of(state, "again")
        assert two["termination"] == "cancelled", out[-4000:]
        daemon = make_daemon().start()
        daemon.wait_ready()
        done = runspec_cli(
            "submit", str(spec), "--resume", "--state", str(state), "--inbox", str(inbox)
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "a new budget of 30m" in done.stdout, done.stdout
        three = wait_record(state, "again", lambda r: r["status"] == "finished", 400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        end_leftovers(state)
    # Resumed here: the new budget said once, on past the interrupted epoch.
    lines = [line for line in out.splitlines() if "a new budget of 30m" in line]
    assert len(lines) == 1, out[-4000:]
    assert f"epoch {one['epoch']}/7" not in out, out[-4000:]
    assert two["deadline"] != one["deadline"]
    assert unnamed_edges(RunRecord.from_json(two).history) == [], two["history"]
    # Resumed by the daemon: to the end, on past the cancelled epoch.
    assert three["termination"] == "completed" and three["epoch"] == 7, three
    assert three["resumes"] == 2, three
    assert f"epoch {two['epoch']}/7" not in daemon.output.split("resum", 1)[-1], daemon.output
    assert unnamed_edges(RunRecord.from_json(three).history) == [], three["history"]


def test_resume_refuses_where_nothing_can_be_resumed(
    write_spec: SpecWriter, tmp_path: Path
) -> None:
    spec = write_spec("nothing", push={"dir": str(tmp_path / "pushed")})
    proc = start_run(spec, tmp_path / "state", None, "--resume")
    code, out = finish_run(proc, timeout=120)
    assert code == 2, out
    assert "nothing to resume" in out and "holds no runspec record" in out, out


def test_resume_refuses_a_target_that_holds_another_run(
    write_spec: SpecWriter, tmp_path: Path
) -> None:
    pushed = tmp_path / "pushed" / "mine" / "runspec"
    pushed.mkdir(parents=True)
    (pushed / "record.json").write_text(json.dumps({"name": "other", "spec_sha256": "ab"}))
    (pushed / "manifest.json").write_text(json.dumps({"run": "other", "files": []}))
    spec = write_spec("mine", push={"dir": str(tmp_path / "pushed")})
    proc = start_run(spec, tmp_path / "state", None, "--resume")
    code, out = finish_run(proc, timeout=120)
    assert code == 2, out
    assert "holds another run, 'other'" in out, out
    assert not (tmp_path / "state" / "jobs" / "mine" / "record.json").exists()


def test_a_run_that_failed_for_good_is_marked_and_never_resumed(
    write_spec: SpecWriter, tmp_path: Path
) -> None:
    spec = write_spec(
        "typo", dataset={"path": "/nonexistent/dataset/data.yaml"},
        push={"dir": str(tmp_path / "pushed")}, finish={"action": "none"},
    )  # fmt: skip
    state = tmp_path / "state"
    code, out = finish_run(start_run(spec, state), timeout=300)
    assert code == 1, out[-4000:]
    record = record_of(state, "typo")
    assert record["terminal"] and "/nonexistent/dataset" in record["terminal"]["reason"], record
    code, out = finish_run(start_run(spec, state, None, "--resume"), timeout=120)
    assert code == 2, out
    assert "failed for good and is not resumed" in out and "/nonexistent/dataset" in out, out
    assert "rm typo" in out, out  # the mark is on this disk: `rm` clears it
