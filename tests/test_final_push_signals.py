"""Ctrl-C while the final push retries: the first is said, the second exits at once, and the run
is left where `push NAME`, `rm` and `--resume` take it. Whole `runspec run`s against the local
Hub, whose commits fail until the test ends. And a second Ctrl-C gives up at once in the steps
before training too: a staging whose download never ends."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from runspec.errors import GaveUp
from runspec.preflight import run_preflight
from runspec.run.accept import accept
from runspec.spec.loader import load_spec
from runspec.store.paths import RunPaths
from tests.fixtures_daemon import end_leftovers
from tests.fixtures_run import RUNSPEC, SpecWriter, finish_run, record_of, start_run, wait_record
from tests.hubserver import HubServer


def _runspec(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RUNSPEC, *args], capture_output=True, text=True, check=False)


def _log(state: Path, name: str) -> str:
    try:
        return (state / "jobs" / name / "runspec.log").read_text()
    except OSError:
        return ""


def _wait_log(state: Path, name: str, text: str, after: str, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        log = _log(state, name)
        if after in log and text in log[log.index(after) :]:
            return
        time.sleep(0.2)
    pytest.fail(
        f"{text!r} after {after!r} not in runspec.log within {timeout} s:\n{_log(state, name)}"
    )


@pytest.mark.training
def test_two_signals_during_a_retrying_final_push(
    hub_server: HubServer, hub_env: dict[str, str], write_spec: SpecWriter, tmp_path: Path
) -> None:
    spec = write_spec(
        "sigpush", epochs=1, push={"hub": {"repo": "me/sigpush"}, "every": "1h"},
        finish={"action": "none"},
    )  # fmt: skip
    state = tmp_path / "state"
    hub_server.fail("commit", "500", times=100000)  # an outage that outlasts the test
    proc = start_run(spec, state, hub_env)
    try:
        wait_record(state, "sigpush", lambda r: r["status"] == "pushing", timeout=300)
        _wait_log(state, "sigpush", "retrying in 2s", after="final push (at most", timeout=120)
        proc.send_signal(signal.SIGINT)
        _wait_log(state, "sigpush", "second signal exits now", after="final push", timeout=30)
        proc.send_signal(signal.SIGINT)
        # The push's own window is half an hour: only the signal ends it this soon.
        code, out = finish_run(proc, timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "interrupted during the final push" in out, out[-4000:]
    # The retry lines say the final push's real pauses, and no client line without -v.
    final = out[out.index("final push (at most") :]
    assert "retrying in 1s" in final and "retrying in 2s" in final, final
    assert "HTTP Request:" not in out
    assert "no finish action follows" in out
    assert f"runspec push sigpush --state {state}" in out
    assert "second signal: the final push is given up, NOT verified" in out
    assert code == 3, out[-4000:]
    record = record_of(state, "sigpush")
    assert record["status"] == "finished", record["status"]
    assert record["last_push"] is None or not record["last_push"]["final"]
    # cancel and rm take it as the finished run it is.
    cancel = _runspec("cancel", "sigpush", "--state", str(state))
    assert "already finished" in cancel.stderr, cancel.stderr
    assert "whoever drives it next" not in cancel.stdout + cancel.stderr
    rm = _runspec("rm", "sigpush", "--state", str(state))
    assert "cancel it first" not in rm.stderr and "stop it first" not in rm.stderr, rm.stderr
    assert "runspec push sigpush" in rm.stderr, rm.stderr


@pytest.mark.training
def test_a_second_signal_during_the_first_ones_push_exits_at_once(
    hub_server: HubServer, hub_env: dict[str, str], write_spec: SpecWriter, tmp_path: Path
) -> None:
    # The first Ctrl-C in training pushes the newest checkpoint at once, with a minute of
    # retries; a second one waited out that minute before it was heard.
    spec = write_spec(
        "sigtrain", epochs=50, push={"hub": {"repo": "me/sigtrain"}, "every": "1h"},
        finish={"action": "none"},
    )  # fmt: skip
    state = tmp_path / "state"
    hub_server.fail("commit", "500", times=100000)  # an outage that outlasts the test
    proc = start_run(spec, state, hub_env)
    try:
        wait_record(state, "sigtrain", lambda r: r.get("epoch", 0) >= 1, timeout=300)
        proc.send_signal(signal.SIGINT)
        _wait_log(state, "sigtrain", "retrying in", after="pushing the newest", timeout=60)
        proc.send_signal(signal.SIGINT)
        # The immediate push retries for a minute, the final push for half an hour.
        code, out = finish_run(proc, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # What is left undone, and how to do it.
    undone = "second signal: exiting now, with no final push and no finish action: "
    # The trainer is ended by the second signal, unless it reached its boundary first (the
    # first signal's stop: on a loaded machine the push's first retry can outlast an epoch).
    before = out[: out.index(undone)] if undone in out else out
    stopped = "training stopped at epoch" in before
    assert "second signal: ending the trainer now" in out or stopped, out[-4000:]
    assert f"{undone}runspec push sigtrain --state {state} pushes" in out, out[-4000:]
    assert code != 0, out[-4000:]


def test_a_second_signal_during_a_slow_staging_gives_it_up_at_once(
    hub_server: HubServer, hub_env: dict[str, str], write_spec: SpecWriter, tmp_path: Path
) -> None:
    # A second Ctrl-C waited for the step under way: a download the Hub never finishes kept
    # the run until the client gave up on its own (minutes), whatever the person asked.
    hub_server.put_file("org/slowds", "ds.tar", b"a tar that never arrives", repo_type="dataset")
    # The dataset's download is never answered; the rest of the Hub answers as ever.
    hub_server.fail("resolve", "hang", times=100_000, method="GET", where="org/slowds")
    spec = write_spec(
        "sigstage",
        dataset={"hub": {"repo": "org/slowds", "file": "ds.tar"}, "data": "ds/data.yaml"},
        push={"hub": {"repo": "me/sigstage"}},
        finish={"action": "none"},
    )
    state = tmp_path / "state"
    proc = start_run(spec, state, {**hub_env, "HF_HUB_DOWNLOAD_TIMEOUT": "600"})
    try:
        _wait_log(state, "sigstage", "fetching dataset", after="preflight", timeout=180)
        proc.send_signal(signal.SIGINT)
        first = "interrupted during the staging"
        _wait_log(state, "sigstage", "a second signal gives it up", after=first, timeout=30)
        proc.send_signal(signal.SIGINT)
        # The download hangs for a minute a try, and is tried again: only the signal ends it.
        code, out = finish_run(proc, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        end_leftovers(state)  # the failsafe's watcher
    # What it leaves: the failsafe's watcher (this run applies nothing), said with its disarm.
    assert "failsafe: left armed: watcher pid" in out and "to disarm it: kill" in out, out
    assert "second signal: the staging is given up at once" in out, out[-4000:]
    assert "nothing was trained or pushed" in out, out[-4000:]
    assert f"runspec run {spec} --resume --state {state}" in out, out[-4000:]
    assert code == 130, out[-4000:]
    record = record_of(state, "sigstage")
    # Left where a resume takes it up: no end was pushed or recorded as good.
    assert record["status"] == "staging" and record["last_push"] is None, record
    made = ("model", "me/sigstage") in hub_server.repos  # the lease's, from the run's start
    files = hub_server.files("me/sigstage") if made else []
    assert not [f for f in files if f.endswith(".pt")], files


def test_a_preflight_given_up_ends_its_checks_child(write_spec: SpecWriter, tmp_path: Path) -> None:
    """The preflight's child runs in a session of its own, out of a Ctrl-C's reach: giving the
    preflight up ends it, not only the wait for it."""
    state = tmp_path / "state"
    spec = load_spec(write_spec("gaveup"), state)
    accept(spec, state)
    paths = RunPaths.for_spec(spec, state)

    def checks_child() -> list[str]:
        """The child, named by this test's own state folder."""
        ps = subprocess.run(
            ["ps", "-ww", "-eo", "stat,args"], capture_output=True, text=True, check=True
        )
        return [
            line
            for line in ps.stdout.splitlines()
            if f"--state {state}" in line and "runspec.preflight" in line and line[0] != "Z"
        ]

    with pytest.raises(GaveUp):
        # The second signal comes once the child is under way.
        run_preflight(
            spec, paths, "machine", 300, accepted=True, give_up=lambda: bool(checks_child())
        )
    assert checks_child() == []
