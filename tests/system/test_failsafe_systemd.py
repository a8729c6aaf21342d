"""The failsafe under a real systemd: with no runspec process alive, the transient timer armed
for a run fires at its time and applies `finish.unverified` through the provider, with the
provider's credentials from the daemon's EnvironmentFile (never the command line).

The timer's command line is `failsafe.arm_command`'s, exactly as `arm` would run it; the time is
a few seconds from now instead of deadline + overrun + 2 min (arm's own arithmetic is tested in
test_finish.py). The provider is the local vast.ai stand-in on the host's loopback, which the
container shares.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import pytest

from runspec.clock import utc_iso
from runspec.machine import failsafe
from runspec.run.accept import accept
from runspec.spec.loader import load_spec_text
from runspec.store.paths import RunPaths
from runspec.store.state import RecordStore, RunStatus
from tests.fixtures_daemon import wait_until
from tests.fixtures_providers import StandIn, vast_answers_stopped
from tests.fixtures_push import write_checkpoint
from tests.fixtures_system import Installed

pytestmark = pytest.mark.system

VAST_KEY = "vast-key-failsafe-system-test"
SPEC = """\
runspec: 1
name: orphan
dataset: {synthetic: {}}
train: {model: yolo9-t, epochs: 3, device: cpu}
push: {dir: /mnt/volume}
budget: {wall_clock: 10m, overrun: 5m}
finish: {action: destroy, provider: vast, unverified: stop}
"""


def test_the_failsafe_timer_stops_the_machine_when_runspec_is_gone(
    runspecd_container: Installed, standin: StandIn
) -> None:
    c = runspecd_container.container
    vast_answers_stopped(standin)
    env_file = runspecd_container.root / "etc/runspec/env"
    env_file.write_text(
        f"CONTAINER_ID=4242\nCONTAINER_API_KEY={VAST_KEY}\nRUNSPEC_VAST_API={standin.url}\n"
    )
    env_file.chmod(0o600)

    # A run that started and was training when everything of runspec died: no daemon runs in
    # the container (the installed unit started at boot), no push was ever verified.
    c.sh("systemctl stop runspecd")
    assert c.show("runspecd", "ActiveState")["ActiveState"] == "inactive"
    spec = load_spec_text(SPEC, "orphan.yaml")
    store = RecordStore(runspecd_container.state)
    record = accept(spec, runspecd_container.state)
    record.status = RunStatus.TRAINING
    record.started_at = utc_iso(time.time() - 900)
    record.deadline = utc_iso(time.time() - 300)
    store.save(record)
    # It trained: a whole checkpoint that no push ever verified is on the machine's disk.
    write_checkpoint(runspecd_container.state / "runs/orphan/weights/last.pt", 2, size=1000)

    inside = RunPaths.for_spec(spec, Path("/var/lib/runspec"))
    argv = failsafe.arm_command(spec, inside, time.time() + 4)
    assert not any(VAST_KEY in part for part in argv)
    c.sh(shlex.join(argv))
    timers = c.sh("systemctl list-timers --all --no-pager runspec-failsafe-orphan.timer").stdout
    assert "runspec-failsafe-orphan.timer" in timers, timers

    try:
        wait_until(lambda: bool(standin.made("PUT")), timeout=60, what="the failsafe's stop")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{c.journal_text()[-4000:]}") from None
    (stop,) = standin.made("PUT")
    assert stop.path == "/api/v0/instances/4242/"
    assert json.loads(stop.body) == {"state": "stopped"}
    assert stop.header("Authorization") == f"Bearer {VAST_KEY}"
    assert standin.made("DELETE") == [], "the failsafe destroyed a machine with unverified weights"

    failsafe_file = runspecd_container.state / "jobs/orphan/failsafe.json"

    def recorded() -> bool:
        try:
            return "fired" in json.loads(failsafe_file.read_text())
        except (OSError, ValueError):
            return False

    # What the timer did goes to its own file; the run's record is its owner's alone.
    wait_until(recorded, timeout=30, what="the failsafe's own record")
    fired = json.loads(failsafe_file.read_text())["fired"]
    assert fired["result"]["action"] == "stop" and fired["result"]["verified"] is False
    saved = store.load("orphan")
    assert saved is not None and saved.finish is None and saved.status is RunStatus.TRAINING
    journal = c.journal_text("runspec-failsafe-orphan")
    assert "orphan: the run is still training past deadline + overrun" in journal, journal
    assert VAST_KEY not in c.journal_text()
