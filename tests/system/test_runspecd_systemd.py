"""runspecd under a real systemd (booted in a container): readiness, reload, restart after a
kill, stop; and a whole run that ends with a `command` finish powering the container off."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import pytest

from tests.fixtures_daemon import spec_text, wait_until
from tests.fixtures_system import Installed
from tests.system.harness import GUARDED_POWEROFF

pytestmark = pytest.mark.system


def test_unit_lifecycle_under_systemd(runspecd_container: Installed) -> None:
    c = runspecd_container.container
    # Type=notify: `systemctl start` returns once the daemon said READY=1.
    c.sh("systemctl start runspecd")
    props = c.show("runspecd", "ActiveState", "SubState", "StatusText", "WatchdogUSec", "MainPID")
    assert (props["ActiveState"], props["SubState"]) == ("active", "running")
    assert props["StatusText"].startswith("idle")
    assert props["WatchdogUSec"] == "30s"
    first_pid = props["MainPID"]

    # A spec dropped in the inbox is claimed; its record is in the state folder.
    runspecd_container.submit("sys1", spec_text("sys1"))
    wait_until((runspecd_container.state / "jobs/sys1/record.json").exists, what="the record")

    c.sh("systemctl reload runspecd")
    wait_until(lambda: "SIGHUP: reloading" in c.journal_text("runspecd"), what="the reload")
    # RELOADING=1 ... READY=1: the unit is active again once the daemon re-read its config.
    wait_until(lambda: c.show("runspecd", "ActiveState")["ActiveState"] == "active", what="ready")

    # Killed outright: Restart=on-failure brings it back (after RestartSec) and it is ready again.
    c.sh("systemctl kill -s KILL runspecd")
    wait_until(
        lambda: (
            c.show("runspecd", "NRestarts", "SubState") == {"NRestarts": "1", "SubState": "running"}
        ),
        what="the restart",
    )
    assert c.show("runspecd", "MainPID")["MainPID"] != first_pid

    c.sh("systemctl stop runspecd")
    assert c.show("runspecd", "ActiveState")["ActiveState"] == "inactive"
    assert "Stopped runspecd.service" in c.journal_text() or "Deactivated" in c.journal_text()


@pytest.mark.training
# Its own waits bound it (the first epoch, the re-attaches, the power-off); a booted container
# under the suite's load has taken 297 s, so the suite's 300 s default would cut it short.
@pytest.mark.timeout(900)
def test_a_run_trains_pushes_and_its_finish_powers_the_container_off(
    runspecd_container: Installed,
) -> None:
    c = runspecd_container.container
    state = runspecd_container.state
    guard = state / "guarded-poweroff.sh"
    guard.write_text(GUARDED_POWEROFF)
    spec = (
        "runspec: 1\nname: sysrun\n"
        "dataset:\n  synthetic: {train: 8, val: 4, imgsz: 64, classes: 3, seed: 0}\n"
        "train:\n  model: yolo9-t\n  epochs: 3\n  batch: 4\n  imgsz: 32\n  device: cpu\n"
        "  save_period: 3\n  args: {pretrained: false, workers: 0, eval_interval: 1}\n"
        "push:\n  dir: pushed\n  every: 1m\n"
        "budget:\n  wall_clock: 15m\n"
        # The container's two cores are the suite's too: one OpenMP thread (tests/conftest.py).
        "env: {OMP_NUM_THREADS: 1}\n"
        "preflight: {matmul: false, collective: false}\n"
        "finish:\n  action: command\n"
        f"  command: [/bin/sh, {Path('/var/lib/runspec') / guard.name}, {c.name}]\n"
    )
    c.sh("systemctl start runspecd")
    runspecd_container.submit("sysrun", spec)
    wait_until(
        lambda: runspecd_container.record("sysrun").get("epoch", 0) >= 1,
        timeout=300,
        what="the first epoch",
    )
    trainer = json.loads((state / "jobs/sysrun/trainer.json").read_text())
    pid = trainer["identity"]["pid"]
    attached = f"re-attached to the running trainer (pid {pid}"
    # The trainer held still (SIGSTOP) while the daemon is killed and restarted: a machine too
    # busy to run it, so three epochs outlast both re-attaches on any machine.
    c.sh(f"kill -STOP {pid}")
    try:
        # A kill mid-run: systemd restarts the daemon, which re-attaches to the same trainer.
        c.sh("systemctl kill -s KILL runspecd")
        wait_until(lambda: c.journal_text("runspecd").count(attached) == 1, what="the re-attach")
        assert c.show("runspecd", "NRestarts")["NRestarts"] == "1"
        # A restart costs the training nothing: the daemon detaches and re-attaches again.
        c.sh("systemctl restart runspecd")
        wait_until(lambda: c.journal_text("runspecd").count(attached) == 2, what="the re-attach")
    finally:
        c.sh(f"kill -CONT {pid}", check=False)
    # The finish powers the container off once the final push is verified.
    assert c.wait_exit(timeout=600) == 0
    data = runspecd_container.record("sysrun")
    assert data["status"] == "finished" and data["termination"] == "completed"
    assert data["epoch"] == 3
    assert data["restarts_used"] == 0  # never relaunched: the same trainer did every epoch
    assert data["last_push"]["final"] is True
    pushed = state / "pushed/sysrun/weights/last.pt"
    assert pushed.read_bytes() == (state / "runs/sysrun/weights/last.pt").read_bytes()
    journal = c.journal_text()
    verified = journal.find("pushed epoch 3 (final)")
    finish = journal.find("sysrun: finish: about to run ['/bin/sh'", verified)
    powered = journal.find("Reached target poweroff.target")
    assert -1 < verified < finish < powered, journal[-3000:]


@pytest.mark.training
def test_system_shutdown_mid_run_pushes_the_newest_checkpoint_first(
    runspecd_container: Installed,
) -> None:
    c = runspecd_container.container
    state = runspecd_container.state
    spec = (
        "runspec: 1\nname: preempted\n"
        "dataset:\n  synthetic: {train: 8, val: 4, imgsz: 64, classes: 3, seed: 0}\n"
        "train:\n  model: yolo9-t\n  epochs: 200\n  batch: 4\n  imgsz: 32\n  device: cpu\n"
        "  save_period: 1\n  args: {pretrained: false, workers: 0, eval_interval: 1}\n"
        "push:\n  dir: pushed\n  every: 1h\n"
        "budget:\n  wall_clock: 15m\n"
        "env: {OMP_NUM_THREADS: 1}\n"
        # 200 checkpoints would be 9 GB by the auto estimate; the test stops it after a few.
        "preflight: {matmul: false, collective: false, disk: 600MB}\n"
        "finish:\n  action: none\n"
    )
    c.sh("systemctl start runspecd")
    runspecd_container.submit("preempted", spec)
    wait_until(
        lambda: runspecd_container.record("preempted").get("epoch", 0) >= 2,
        timeout=300,
        what="two epochs",
    )
    c.poweroff_inside()  # the whole system stops: a preemption, say
    assert c.wait_exit(timeout=600) == 0
    journal = c.journal_text()
    stopping = journal.find("the system is stopping; pushing the newest checkpoint")
    pushed = journal.find("preempted: pushed epoch", stopping)
    powered = journal.find("Reached target poweroff.target")
    assert -1 < stopping < pushed < powered, journal[-3000:]
    data = runspecd_container.record("preempted")
    assert data["last_push"] is not None and data["last_push"]["epoch"] >= 2
    # The newest complete checkpoint went out: last.pt, or an epoch_N.pt of the same epoch when
    # the push met LibreYOLO rewriting last.pt. The pushed record names it, whole.
    volume = state / "pushed/preempted"
    named = json.loads((volume / "runspec/record.json").read_text())["checkpoint"]
    assert named["epoch"] == data["last_push"]["epoch"], named
    weights = (volume / named["path"]).read_bytes()
    assert hashlib.sha256(weights).hexdigest() == named["sha256"]


def test_system_shutdown_while_not_training_does_not_wait_for_a_push(
    runspecd_container: Installed,
) -> None:
    """Asked to push at shutdown while its run is still staging, the daemon is answered at
    once that there is nothing to push: the machine stops in seconds, not after the 4-minute
    shutdown push timeout."""
    c = runspecd_container.container
    spec = (
        "runspec: 1\nname: staging\n"
        # Thousands of generated images: staging takes a while.
        "dataset:\n  synthetic: {train: 6000, val: 4, imgsz: 256, classes: 3, seed: 0}\n"
        "train:\n  model: yolo9-t\n  epochs: 2\n  batch: 4\n  imgsz: 32\n  device: cpu\n"
        "  args: {pretrained: false}\n"
        "push:\n  dir: pushed\n"
        "budget:\n  wall_clock: 15m\n"
        "env: {OMP_NUM_THREADS: 1}\n"
        "preflight: {matmul: false, collective: false, doctor: false, disk: 600MB}\n"
    )
    c.sh("systemctl start runspecd")
    runspecd_container.submit("staging", spec)
    wait_until(
        lambda: runspecd_container.record("staging").get("status") == "staging",
        timeout=120,
        what="the staging phase",
    )
    started = time.monotonic()
    c.poweroff_inside()
    assert c.wait_exit(timeout=600) == 0
    took = time.monotonic() - started
    journal = c.journal_text()
    assert "the run is not training: nothing new to push" in journal, journal[-3000:]
    assert took < 90, f"the shutdown took {took:.0f} s: {journal[-3000:]}"


def test_the_journal_files_failures_as_errors_and_warnings(
    runspecd_container: Installed,
) -> None:
    """`journalctl -p warning -u runspecd` shows what went wrong, and only that: a preflight
    FAIL (no GPU for device 0) and a refused spec; every line once, with no timestamp of its
    own beside the journal's."""
    c = runspecd_container.container
    c.sh("systemctl start runspecd")
    gpu = spec_text("gpu-run").replace("device: cpu", "device: 0")
    runspecd_container.submit("gpu-run", gpu)
    runspecd_container.submit("bad", spec_text("bad") + "bogus: 1\n")
    wait_until(
        lambda: runspecd_container.record("gpu-run").get("status") == "finished",
        timeout=300,
        what="the run that fails its preflight",
    )
    for said in ("inbox: rejected bad.yaml", "gpu-run: summary:"):
        wait_until(lambda s=said: s in c.journal_text("runspecd"), what=said)  # type: ignore[misc]
    warnings = c.journal_text("runspecd", priority="warning", output="cat").splitlines()
    for first in (
        "gpu-run: FAIL  gpu: train.device: 0 needs a GPU",
        "inbox: rejected bad.yaml",
        "gpu-run: summary: failed-preflight",
    ):
        assert any(line.startswith(first) for line in warnings), (first, warnings)
    # What went well is not a warning.
    calm = ("runspecd: watching", "preflight (machine)", "gpu-run: queued")
    assert not [line for line in warnings if any(c in line for c in calm)], warnings
    everything = c.journal_text("runspecd", output="cat").splitlines()
    assert "runspecd: watching /var/lib/runspec/inbox (state /var/lib/runspec)" in everything
    # The journal stamps each line; runspec adds neither a timestamp nor a logging format.
    stamped = re.compile(r"^(<\d>)?\d{4}-\d\d-\d\d[ T]\d\d:\d\d")
    assert not [line for line in everything if stamped.match(line)], everything
    assert everything.count("gpu-run: preflight: checking this machine") == 1
