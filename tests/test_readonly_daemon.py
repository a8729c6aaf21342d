"""A read-only state folder never strands a run nor kills the daemon (issue 19.3, the daemon's
side): EROFS, EACCES and EPERM on owner.lock, the records and machine.json are said once and
waited out like a full disk, and the daemon keeps supervising.

The state folder is made read-only for real, mid-run, by a read-only bind mount over it (this
suite runs as root); the run folders live outside it (the daemon config's `runs:`), as on a
machine whose state folder sits on its own volume.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from runspec.clock import parse_utc_iso
from runspec.machine.failsafe import GRACE_ENV
from tests.fixtures_cpu import CpuCap
from tests.fixtures_daemon import DaemonProc, drop, wait_until
from tests.fixtures_providers import StandIn, VastInstance
from tests.fixtures_run import base_spec, merge
from tests.hubserver import HubServer
from tests.test_readonly_state import read_only

pytestmark = pytest.mark.training

BOUND = 300.0
# The failsafe's grace after deadline + overrun (its test seam): what the read-only run's end
# waits for is the failsafe's firing, not the length of its grace (tests/test_failsafe_grace.py).
GRACE = 15.0


def daemon_beside(make_daemon: Any, tmp_path: Path) -> DaemonProc:
    config = tmp_path / "runspecd.yaml"
    config.write_text(yaml.safe_dump({"runs": str(tmp_path / "runs")}))
    daemon: DaemonProc = make_daemon(config=config)
    return daemon


def spec_yaml(name: str, epochs: int, **sections: Any) -> str:
    doc = merge(base_spec(name, epochs), sections)
    doc["push"] = {"hub": {"repo": f"me/{name}"}}
    doc["finish"] = {"action": "destroy", "provider": "vast", "unverified": "stop"}
    return yaml.safe_dump(doc, sort_keys=False)


def vast(standin: StandIn, provider_env: dict[str, str]) -> dict[str, str]:
    VastInstance(standin)
    return {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "vast-key-ro"}


def until(
    daemon: DaemonProc, predicate: Callable[[], object], what: str, bound: float = BOUND
) -> None:
    try:
        wait_until(predicate, timeout=bound, what=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{daemon.output[-6000:]}") from None


def checkpoints(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "runs").rglob("epoch*.pt"))


def epoch(daemon: DaemonProc, name: str) -> int:
    value = (daemon.record(name) or {}).get("epoch") or 0
    return int(value) if isinstance(value, int) else 0


@pytest.mark.timeout(900)
def test_a_state_folder_read_only_mid_run_is_waited_out_and_the_run_ends(
    make_daemon: Any,
    tmp_path: Path,
    hub_server: HubServer,
    standin: StandIn,
    provider_env: dict[str, str],
) -> None:
    daemon = daemon_beside(make_daemon, tmp_path)
    drop(daemon.inbox, "ro.yaml", spec_yaml("ro", 6, train={"save_period": 1}))
    daemon.start(env=vast(standin, provider_env))
    daemon.wait_ready()
    until(daemon, lambda: epoch(daemon, "ro") >= 1, "the first epoch")
    with read_only(daemon.state):
        until(daemon, lambda: "read-only" in daemon.output.lower(), "the read-only note")
        # Training goes on (its run folder is writable), the daemon with it; nothing ends the
        # machine meanwhile.
        until(daemon, lambda: len(checkpoints(tmp_path)) >= 3, "more epochs' checkpoints")
        assert daemon.proc is not None and daemon.proc.poll() is None, daemon.output
        assert standin.made("DELETE") == [] and standin.made("PUT") == []
    until(daemon, lambda: (daemon.record("ro") or {}).get("status") == "finished", "the end")
    assert daemon.proc.poll() is None, daemon.output
    record = daemon.record("ro") or {}
    assert record["termination"] == "completed" and record["epoch"] == 6, daemon.output
    assert record["last_push"]["final"] is True
    assert len(standin.made("DELETE")) == 1 and standin.made("PUT") == []
    local = tmp_path / "runs" / "ro" / "weights" / "last.pt"
    assert hub_server.read_file("me/ro", "weights/last.pt") == local.read_bytes()


@pytest.mark.timeout(1200)
def test_a_state_folder_that_stays_read_only_still_ends_the_machine_by_the_deadline(
    make_daemon: Any,
    tmp_path: Path,
    hub_server: HubServer,
    standin: StandIn,
    provider_env: dict[str, str],
    cpu_cap: CpuCap,
) -> None:
    daemon = daemon_beside(make_daemon, tmp_path)
    # A short budget (the machine's end comes at its deadline + overrun + the failsafe's
    # grace), which still leaves the first epoch well inside it on a loaded machine.
    budget = {"wall_clock": "100s", "overrun": "30s", "reserve": "10s"}
    train = {"save_period": 60}  # only last.pt and best.pt: the disk check passes
    drop(daemon.inbox, "stuck.yaml", spec_yaml("stuck", 60, budget=budget, train=train))
    daemon.start(env={**vast(standin, provider_env), GRACE_ENV: str(GRACE)})
    assert daemon.proc is not None
    daemon.wait_ready()
    until(daemon, lambda: epoch(daemon, "stuck") >= 1 or "summary:" in daemon.output, "epoch 1")
    assert epoch(daemon, "stuck") >= 1, daemon.output
    # Training until the deadline, on a slower machine from here: what counts is the end.
    # The trainer alone is slowed (a twentieth of a core: it trains on, and burns next to
    # nothing for the two minutes it has left); the daemon and its failsafe watcher, who end
    # the machine, run at full speed.
    trainer = json.loads((daemon.state / "jobs" / "stuck" / "trainer.json").read_text())
    cpu_cap.hold(int(trainer["identity"]["pid"]))
    cpu_cap.limit(0.05)
    record = daemon.record("stuck") or {}
    deadline = parse_utc_iso(str(record["deadline"]))
    with read_only(daemon.state):
        # Nobody can record anything now: the daemon lives, and the machine's end still
        # comes by the deadline plus the overrun (and the failsafe's grace), as a stop: the
        # newest checkpoints were never verified off this machine.
        until(daemon, lambda: bool(standin.made("PUT")), "the machine's stop", bound=600)
        stopped = time.time()
        assert daemon.proc is not None and daemon.proc.poll() is None, daemon.output
    # Not before the overrun is spent (the record's deadline has whole seconds), nor long after.
    assert deadline + 30 - 1 <= stopped <= deadline + 30 + GRACE + 60, (
        stopped - deadline,
        daemon.output,
    )
    assert standin.made("DELETE") == [], daemon.output
    assert len(standin.made("PUT")) == 1
