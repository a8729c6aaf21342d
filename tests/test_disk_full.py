"""A full disk is a state, not a strand, and never a reason to destroy: through a real daemon
whose state folder (the default layout: runs, staging and records under it) is a small tmpfs
that really fills.

The first test is the issue's "no fault at all": the preflight is told the run fits, the
checkpoints do, their staged copies do not. The old code staged nothing, called the push of
what was left verified and destroyed the machine. The second fills the disk under the trainer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures_daemon import DaemonProc, drop, wait_until
from tests.fixtures_disk import SmallFs, fill
from tests.fixtures_providers import StandIn, VastInstance
from tests.fixtures_run import base_spec, merge

pytestmark = pytest.mark.training

BOUND = 400.0


def spec_yaml(name: str, epochs: int, volume: Path, **sections: Any) -> str:
    doc = merge(base_spec(name, epochs), sections)
    # What the user told the preflight: the run "fits" (it does; its staged copies do not).
    doc["preflight"] = {"doctor": False, "disk": "100MB"}
    doc["push"] = {"dir": str(volume), "every": "1h"}
    return yaml.safe_dump(doc, sort_keys=False)


def vast(standin: StandIn, provider_env: dict[str, str]) -> dict[str, str]:
    VastInstance(standin)
    return {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "vast-key-disk"}


def status(state: Path, name: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "runspec", "status", name, "--json", "--state", str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    rows: list[dict[str, Any]] = json.loads(out.stdout)["runs"]
    return rows


def daemon_on(make_daemon: Any, state: Path) -> DaemonProc:
    state.chmod(0o700)
    daemon: DaemonProc = make_daemon(state=state)
    return daemon


@pytest.mark.timeout(900)
def test_a_disk_too_small_for_the_staged_copies_never_destroys_and_recovers(
    make_daemon: Any, small_fs: SmallFs, standin: StandIn, provider_env: dict[str, str]
) -> None:
    state, volume = small_fs(400), small_fs(400)
    filler = fill(state, leave=150_000_000)  # 150 MB free: one epoch's 3 checkpoints fit
    daemon = daemon_on(make_daemon, state)
    text = spec_yaml("full", 1, volume, finish={"action": "destroy", "provider": "vast"})
    drop(daemon.inbox, "full.yaml", text)
    daemon.start(env=vast(standin, provider_env))
    daemon.wait_ready()
    wait_until(lambda: "DISK FULL" in daemon.output, timeout=BOUND, what="the full disk")
    assert standin.made("DELETE") == [], "destroyed while the newest weights were unpushed"
    # The push's failure is said right after the note of the full disk.
    wait_until(lambda: "push NOT possible: no space left" in daemon.output, what="the refusal")
    # `runspec status` says so, though the disk is too full to save the run's record.
    (row,) = status(daemon.state, "full")
    assert row["disk_full"]["path"].startswith(str(state)), row

    filler.unlink()  # space comes back: the run goes on by itself
    wait_until(lambda: bool(standin.made("DELETE")), timeout=BOUND, what="the destroy")
    record = daemon.record("full") or {}
    assert record["last_push"]["final"] is True and record["disk_full"] is None
    local = state / "runs" / "full" / "weights" / "last.pt"
    assert (volume / "full" / "weights" / "last.pt").read_bytes() == local.read_bytes()
    assert len(standin.made("DELETE")) == 1


@pytest.mark.timeout(900)
def test_a_disk_filled_under_the_trainer_is_waited_out_and_the_run_completes(
    make_daemon: Any, small_fs: SmallFs
) -> None:
    state, volume = small_fs(600), small_fs(600)
    daemon = daemon_on(make_daemon, state)
    # save_period 1: every epoch's saves need room, so the next one after the filling fails.
    # (With the default, a trainer that ran out of space after its last epoch's last.pt was
    # resumed from it, trained nothing, and left the record one epoch short: seen once, open.)
    drop(daemon.inbox, "squeezed.yaml", spec_yaml("squeezed", 3, volume, train={"save_period": 1}))
    daemon.start()
    daemon.wait_ready()
    wait_until(lambda: (daemon.record("squeezed") or {}).get("epoch", 0) >= 1, timeout=BOUND)
    filler = fill(state, leave=1_000_000)  # the next epoch's checkpoints cannot be written
    wait_until(
        lambda: "the trainer ran out of space" in daemon.output,
        timeout=BOUND,
        what="the wait for space",
    )
    assert (daemon.record("squeezed") or {}).get("status") in ("training", "stopping")
    filler.unlink()
    wait_until(
        lambda: (daemon.record("squeezed") or {}).get("status") == "finished",
        timeout=BOUND,
        what="the end of the run",
    )
    record = daemon.record("squeezed") or {}
    assert record["termination"] == "completed" and record["epoch"] == 3, daemon.output
    assert record["last_push"]["final"] is True
    manifest = json.loads((volume / "squeezed" / "runspec" / "manifest.json").read_text())
    assert manifest["epoch"] == 3
