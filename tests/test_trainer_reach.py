"""Outside systemd the trainer reaches what its unit would give it and no more (issue 34): code
in the trainer that rewrites its job's spec.yaml to a `finish: command` and kills its driver
never has that command run by the failsafe, which holds the keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runspec.clock import utc_iso
from runspec.machine import failsafe, watcher
from runspec.run.accept import accept
from runspec.secrets.childwalls import CAP_SYS_ADMIN, has_capability
from runspec.spec.loader import load_spec_text
from runspec.store.paths import RunPaths
from runspec.store.state import RecordStore, RunStatus
from runspec.trainer import control, launcher
from tests.fixtures_daemon import REPO, end_leftovers, spec_text, wait_until
from tests.fixtures_providers import StandIn, VastInstance
from tests.fixtures_run import SpecWriter, finish_run, record_of, start_run, wait_record
from tests.fixtures_training import TinyJob, wait_for

KEY = "vast-key-only-in-the-failsafes-environment"

# The trainer's code, as a hostile dataset or model could make it: the real trainer's walls
# first (what runspec.trainer puts up before any third-party code runs), then the attack.
HOSTILE = """
import json, os, signal, sys
from pathlib import Path
from runspec.trainer.sessionwalls import put_up_walls
from runspec.trainer.control import TrainJob

job = TrainJob.read(Path(sys.argv[1]))
put_up_walls(job)
spec, marker, rewrite, pids = Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
tried = {}
login = Path(os.environ["HF_HOME"]) / "token"
try:
    tried["login"] = login.read_text()
except OSError as exc:
    tried["login"] = str(exc)
from huggingface_hub import get_token
tried["hub_token"] = get_token() or ""
if rewrite == "rewrite":
    try:
        text = spec.read_text().replace(
            "finish:\\n  action: none\\n",
            "finish:\\n  action: command\\n  command: [touch, " + marker + "]\\n",
        )
        spec.write_text(text)
        tried["spec"] = "rewritten"
    except OSError as exc:
        tried["spec"] = str(exc)
for pid in pids:
    try:
        os.kill(int(pid), signal.SIGKILL)
        tried["kill " + pid] = "killed"
    except OSError as exc:
        tried["kill " + pid] = str(exc)
(Path(job.control_dir) / "hostile.json").write_text(json.dumps(tried))
"""


@pytest.fixture
def driver() -> Iterator[subprocess.Popen[bytes]]:
    """`runspec run`, as the trainer sees it: a process of the same uid in its own session."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True
    )
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def _accepted(state: Path, text: str | bytes = spec_text("reach")) -> tuple[RunPaths, str]:
    """A run in training past its deadline, whose spec ends nothing (finish: none)."""
    spec = load_spec_text(text, "reach.yaml")
    record = accept(spec, state)
    record.status = RunStatus.TRAINING
    record.started_at = utc_iso(time.time() - 900)
    record.deadline = utc_iso(time.time() - 300)
    RecordStore(state).save(record)
    return RecordStore(state).layout.run_paths("reach"), spec.sha256


def _hostile_trainer(
    tiny_job: TinyJob,
    tmp_path: Path,
    marker: Path,
    monkeypatch: pytest.MonkeyPatch,
    rewrite: bool,
    kill: list[int],
) -> dict[str, str]:
    """The real launcher starts the run's trainer outside systemd; its code is the test's."""
    job, paths = tiny_job("reach")  # the accepted run's folders (the same state folder)
    hostile = tmp_path / "hostile.py"
    hostile.write_text(HOSTILE)
    how = "rewrite" if rewrite else "keep"
    extra = [str(paths.spec_file), str(marker), how, *map(str, kill)]

    def argv(job_file: Path) -> list[str]:
        return [sys.executable, "-I", str(hostile), str(job_file), *extra]

    monkeypatch.setattr(launcher, "_trainer_argv", argv)
    handle = launcher.start(job, paths, use_systemd=False)
    wait_for(lambda: not handle.alive(), 120, "the hostile trainer's exit")
    tried_file = paths.control_dir / "hostile.json"
    assert tried_file.exists(), Path(job.log).read_text()[-3000:]
    tried: dict[str, str] = json.loads(tried_file.read_text())
    return tried


@pytest.mark.parametrize("armed", ["timer", "watcher"])
def test_a_trainer_that_rewrites_its_spec_and_kills_its_driver_never_has_its_finish_run(
    tmp_path: Path,
    tiny_job: TinyJob,
    driver: subprocess.Popen[bytes],
    monkeypatch: pytest.MonkeyPatch,
    armed: str,
) -> None:
    state, marker = tmp_path / "state", tmp_path / "finish-ran"
    paths, sha256 = _accepted(state)
    spec = load_spec_text(spec_text("reach"), "reach.yaml")
    at = time.time() + 2
    # Armed when the run began, before any trainer ran: as systemd's timer or as the watcher.
    command = (
        failsafe.arm_command(spec, paths, at)
        if armed == "timer"
        else failsafe.watch_command(spec, paths, at)
    )
    tried = _hostile_trainer(tiny_job, tmp_path, marker, monkeypatch, True, [driver.pid])
    if has_capability(CAP_SYS_ADMIN):
        # Its own mount namespace keeps the state folder read-only to it, as its unit would.
        assert "Read-only file system" in tried["spec"], tried
    if tried["spec"] != "rewritten":
        # What a trainer does where no such wall stands (a container without CAP_SYS_ADMIN).
        text = paths.spec_file.read_text()
        paths.spec_file.write_text(
            text.replace("action: none", f"action: command\n  command: [touch, {marker}]")
        )
    env = {**os.environ, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": KEY}
    if armed == "timer":
        argv = command[command.index("--") + 1 :]
        subprocess.run(argv, env=env, cwd=REPO, capture_output=True, timeout=120, check=False)
    else:
        saved = dict(os.environ)
        os.environ.update(env)  # what the daemon's environment would hand the watcher
        try:
            watcher.start(command, paths.failsafe_log)
        finally:
            os.environ.clear()
            os.environ.update(saved)
    wait_until(
        lambda: paths.failsafe_file.exists() and "fired" in paths.failsafe_file.read_text(),
        timeout=120,
        what="the failsafe's note that it fired",
    )
    assert not marker.exists(), f"the trainer's finish ran as the failsafe ({tried})"
    fired = json.loads(paths.failsafe_file.read_text())["fired"]
    assert fired["applied"] is False, fired
    assert "changed since the failsafe was armed" in fired["why"], fired
    assert sha256[:12] in fired["why"], fired


@pytest.mark.parametrize(
    "text",
    [
        spec_text("reach"),
        spec_text("reach").replace("\n", "\r\n"),
        ("\ufeff" + spec_text("reach")).encode(),  # a byte order mark, which accept drops
    ],
    ids=["plain", "crlf", "bom"],
)
def test_the_failsafe_acts_on_its_armed_spec_when_nothing_changed(
    tmp_path: Path, text: str | bytes
) -> None:
    """The check refuses only a changed spec: the run's own finish still happens, whatever
    bytes the spec came as."""
    state = tmp_path / "state"
    paths, _ = _accepted(state, text)
    spec = load_spec_text(text, "reach.yaml")
    argv = failsafe.arm_command(spec, paths, time.time())
    argv = argv[argv.index("--") + 1 :]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    fired = json.loads(paths.failsafe_file.read_text())["fired"]
    assert "changed since" not in fired["why"], (fired, proc.stdout, proc.stderr)
    assert "the run is still training past deadline + overrun" in proc.stdout, proc.stdout


def test_a_trainer_cannot_end_the_failsafe_watcher_which_then_stops_the_machine(
    tmp_path: Path,
    tiny_job: TinyJob,
    driver: subprocess.Popen[bytes],
    monkeypatch: pytest.MonkeyPatch,
    standin: StandIn,
    provider_env: dict[str, str],
) -> None:
    """The trainer kills its driver and then the watcher left to end the machine: the watcher
    (root, but not by its real uid) is out of its reach, and stops the machine at its time."""
    VastInstance(standin)
    text = spec_text("reach").replace(
        "finish:\n  action: none\n", "finish:\n  action: stop\n  provider: vast\n"
    )
    paths, _ = _accepted(tmp_path / "state", text)
    argv = failsafe.watch_command(load_spec_text(text, "reach.yaml"), paths, time.time() + 15)
    saved = dict(os.environ)
    os.environ.update({**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": KEY})
    try:
        watcher.start(argv, paths.failsafe_log)  # as arm() starts it when the run begins
    finally:
        os.environ.clear()
        os.environ.update(saved)
    wait_until(paths.failsafe_watch.exists, timeout=60, what="the watcher")
    pid = int(json.loads(paths.failsafe_watch.read_text())["pid"])
    marker = tmp_path / "unused"
    tried = _hostile_trainer(tiny_job, tmp_path, marker, monkeypatch, False, [driver.pid, pid])
    assert tried[f"kill {driver.pid}"] == "killed"  # where it shares the driver's uid
    wait_until(lambda: bool(standin.made("PUT")), timeout=120, what="the watcher's stop")
    (stop,) = standin.made("PUT")
    assert stop.header("Authorization") == f"Bearer {KEY}"
    assert tried[f"kill {pid}"] != "killed", tried


@pytest.mark.training
def test_the_trainer_cannot_signal_runspec_run_which_ends_the_run_as_root_whole(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    """A real `runspec run` outside systemd: a process with its trainer's credentials (uid 0 and
    the walls runspec.trainer puts up) cannot kill it; the run completes, and its finish command
    (a shell, which drops an effective uid that is not its real one) runs as root whole."""
    ids = tmp_path / "finish-ids"
    spec = write_spec(
        "apart",
        epochs=30,
        push={"dir": str(tmp_path / "pushed")},  # verified weights: the finish is the action
        finish={"action": "command", "command": ["sh", "-c", f"id -u > {ids}; id -ru >> {ids}"]},
    )
    state = tmp_path / "state"
    proc = start_run(spec, state)
    try:
        wait_record(state, "apart", lambda r: r.get("epoch", 0) >= 1, 300)
        hostile = tmp_path / "hostile.py"
        hostile.write_text(HOSTILE)
        job_file = state / "jobs" / "apart" / "train_job.json"
        attack = subprocess.run(
            [sys.executable, "-I", str(hostile), str(job_file), "/nonexistent", "-", "keep",
             str(proc.pid)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        tried = json.loads((state / "jobs/apart/control/hostile.json").read_text())
        assert "Operation not permitted" in tried[f"kill {proc.pid}"], (tried, attack.stderr)
        assert proc.poll() is None
        # The budget's stop at the next epoch boundary: the run ends, and applies its finish.
        control.request_stop(state / "jobs/apart/control", "budget")
        _, out = finish_run(proc, timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        end_leftovers(state)
    assert record_of(state, "apart")["status"] == "finished", out[-3000:]
    assert ids.exists(), out[-3000:]
    assert ids.read_text().split() == ["0", "0"], out[-3000:]


def test_a_trainer_that_needs_no_token_never_reads_the_stored_hub_login(
    tmp_path: Path, tiny_job: TinyJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hf auth login` as root leaves the token in HF_HOME/token, which uid 0 reads without
    any capability: a session trainer (a LibreYOLO weight name needs no token) sees it empty,
    and its huggingface_hub finds no login to send."""
    hf_home = tmp_path / "hf"
    hf_home.mkdir()
    (hf_home / "token").write_text("hf_storedlogin0123456789")
    monkeypatch.setenv("HF_HOME", str(hf_home))
    tried = _hostile_trainer(tiny_job, tmp_path, tmp_path / "unused", monkeypatch, False, [])
    assert "hf_storedlogin" not in tried["login"], tried
    assert tried["hub_token"] == "", tried
    assert (hf_home / "token").read_text() == "hf_storedlogin0123456789"  # still the owner's
