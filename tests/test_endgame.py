"""The machine's end through a real daemon and a vast.ai stand-in that confirms a stop slowly.

Run A (pushes to the local Hub stand-in, finish destroy) and run B (no push: its weights exist
only on this disk, finish none) are queued together, so A's destroy waits for B, then falls to A's
`finish.unverified` (stop). The daemon is killed (SIGKILL) or stopped as `systemctl restart`
stops it (SIGTERM) while the provider still confirms that stop. The next daemon must finish the
stop as it was begun: never a DELETE, and the stop requested once.
"""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
import yaml

from tests.fixtures_daemon import DaemonProc, drop, wait_until
from tests.fixtures_providers import StandIn, VastInstance
from tests.fixtures_run import base_spec, merge
from tests.hubserver import HubServer

pytestmark = pytest.mark.training

VAST_KEY = "vast-key-endgame-test"
BOUND = 300.0


def spec_yaml(name: str, epochs: int = 1, **sections: Any) -> str:
    doc = base_spec(name, epochs)
    if "dataset" in sections:
        doc["dataset"] = sections.pop("dataset")
    doc = merge(doc, sections)
    doc["preflight"] = {"doctor": False, "disk": "600MB"}
    return yaml.safe_dump(doc, sort_keys=False)


def vast_env(provider_env: dict[str, str]) -> dict[str, str]:
    return {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": VAST_KEY}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("stop_with", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_deferred_finish_cut_mid_stop_is_finished_as_a_stop_never_a_destroy(
    make_daemon: Any,
    hub_server: HubServer,
    standin: StandIn,
    provider_env: dict[str, str],
    stop_with: signal.Signals,
) -> None:
    # At SIGTERM, long enough to outlast the daemon's 30 s wait for its worker (3 s a poll); a
    # SIGKILL lands a moment after the stop's PUT, well inside the first poll.
    VastInstance(standin, confirm_polls=16 if stop_with == signal.SIGTERM else 4)
    env = vast_env(provider_env)
    first: DaemonProc = make_daemon()
    # A fails at its dataset at once: it still pushes its files and asks for its finish.
    a = spec_yaml(
        "a-destroys",
        dataset={"path": "/nonexistent/data.yaml"},
        push={"hub": {"repo": "me/a-destroys"}},
        finish={"action": "destroy", "provider": "vast", "unverified": "stop"},
    )
    b = spec_yaml("b-local", finish={"action": "none"})
    drop(first.inbox, "a.yaml", a)
    drop(first.inbox, "b.yaml", b)
    first.start(env=env)
    first.wait_ready()
    wait_until(lambda: bool(standin.made("PUT")), timeout=BOUND, what="the deferred stop")
    assert "finish deferred to the machine's end: run b-local is queued" in first.output
    first.signal(stop_with)
    first.wait(timeout=120)
    machine = json.loads((first.state / "machine.json").read_text())
    assert machine["pending"]["step"] == "applying" and machine["pending"]["action"] == "stop"

    second: DaemonProc = make_daemon()
    second.start("--once", env=env)
    assert second.wait(timeout=BOUND) == 0, second.output
    assert "the machine's end (stop) was under way; confirming it" in second.output
    assert standin.made("DELETE") == [], "a machine with unverified weights was destroyed"
    assert len(standin.made("PUT")) == 1, "the stop was requested twice"
    machine = json.loads((second.state / "machine.json").read_text())
    result = machine["pending"]["result"]
    assert result["action"] == "stop" and result["ok"] and not result["verified"]
    for name in ("a-destroys", "b-local"):
        record = json.loads((second.state / "jobs" / name / "record.json").read_text())
        assert record["status"] == "finished"


@pytest.mark.timeout(600)
def test_the_last_run_applies_the_deferred_destroy_when_every_run_is_verified(
    make_daemon: Any, hub_server: HubServer, standin: StandIn, provider_env: dict[str, str]
) -> None:
    VastInstance(standin)
    daemon: DaemonProc = make_daemon()
    a = spec_yaml(
        "first-destroys",
        dataset={"path": "/nonexistent/data.yaml"},
        push={"hub": {"repo": "me/first-destroys"}},
        finish={"action": "destroy", "provider": "vast"},
    )
    b = spec_yaml("second-pushes", push={"hub": {"repo": "me/second"}}, finish={"action": "none"})
    drop(daemon.inbox, "a.yaml", a)
    drop(daemon.inbox, "b.yaml", b)
    daemon.start("--once", env=vast_env(provider_env))
    assert daemon.wait(timeout=BOUND) == 0, daemon.output
    assert len(standin.made("DELETE")) == 1 and standin.made("PUT") == []
    local = daemon.state / "runs" / "second-pushes" / "weights" / "last.pt"
    assert hub_server.read_file("me/second", "weights/last.pt") == local.read_bytes()
