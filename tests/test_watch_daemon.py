"""The daemon renews the lease of the run it drives (a timed job of its one scheduler, each
renewal in a thread) and writes the final state at the run's end; `runspec status` shows it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.fixtures_daemon import DaemonProc, drop
from tests.fixtures_run import base_spec, merge
from tests.hubserver import HubServer

pytestmark = pytest.mark.training


@pytest.mark.timeout(600)
def test_the_daemon_renews_and_ends_the_lease(
    make_daemon, hub_server: HubServer, provider_env: dict[str, str]
) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon()
    doc = merge(base_spec("leased", 2), {"push": {"hub": {"repo": "me/leased"}},
                                         "watch": {"lease": "10s"}})  # fmt: skip
    drop(daemon.inbox, "leased.yaml", yaml.safe_dump(doc))
    box = {**provider_env, "CONTAINER_ID": "77", "CONTAINER_API_KEY": "box-key"}
    daemon.start("--once", env=box)
    assert daemon.wait(timeout=480) == 0, daemon.output
    lease = json.loads(hub_server.read_file("me/leased", "runspec/lease.json", repo_type="model"))
    assert lease["run"] == "leased" and lease["state"] == "finished"
    assert lease["final_verified"] is True and lease["newest_verified"] == "last.pt"
    assert (lease["provider"], lease["instance"]) == ("vast", "77")
    assert "box-key" not in json.dumps(lease)
    messages = [m for _o, _f, m in hub_server.repo("me/leased").commits]
    assert "runspec: lease of leased (finished)" in messages
    status = subprocess.run(
        [sys.executable, "-m", "runspec", "status", "-a", "--state", str(daemon.state)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    closed = f"leased: lease closed at {lease['renewed_at']} (final push verified)"
    assert closed in status.stdout, status
