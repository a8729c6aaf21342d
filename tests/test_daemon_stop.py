"""`runspec daemon --stop` during training, through a real daemon, real LibreYOLO training and
the local Hub stand-in: the newest checkpoint is pushed and verified at the target before the
daemon exits, the run is left detached (its trainer trains on), `--stop` says what was pushed,
and the next daemon re-attaches the trainer and finishes the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures_daemon import DaemonProc, drop, end_leftovers, wait_until
from tests.fixtures_run import base_spec, merge
from tests.hubserver import HubServer

pytestmark = pytest.mark.training

TRAIN_BOUND = 400.0


def _record(state: Path, name: str) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((state / "jobs" / name / "record.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return data


@pytest.mark.timeout(1200)
def test_daemon_stop_pushes_the_newest_checkpoint_then_leaves_the_run_detached(
    make_daemon, hub_server: HubServer
) -> None:  # type: ignore[no-untyped-def]
    # push.every 1h: after the first epoch's push, nothing is pushed again on its own for a
    # minute (the Hub's commit interval): what --stop pushes is its own doing.
    # 48 images: epochs of seconds, so the newest checkpoint stays as its epoch marker saw it
    # for longer than the stop takes to reach the daemon (sub-second epochs rewrite it first).
    doc = merge(
        base_spec("halted", 4),
        {
            "dataset": {"synthetic": {"train": 48}},
            "push": {"hub": {"repo": "me/halted"}, "every": "1h"},
        },
    )
    first: DaemonProc = make_daemon()
    try:
        first.start()
        first.wait_ready()
        drop(first.inbox, "halted.yaml", yaml.safe_dump(doc))
        wait_until(
            lambda: _record(first.state, "halted").get("epoch", 0) >= 2,
            timeout=TRAIN_BOUND,
            what="the second epoch",
        )
        at_stop = _record(first.state, "halted")["epoch"]
        stopped = subprocess.run(
            [sys.executable, "-m", "runspec", "daemon", "--stop", "--state", str(first.state)],
            capture_output=True,
            text=True,
            timeout=400,
            check=False,
        )
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert first.wait() == 0, first.output
        _stopped_as_said(first, hub_server, at_stop, stopped.stdout)
        _finished_by_the_next_daemon(make_daemon)
    finally:
        end_leftovers(first.state)


def _stopped_as_said(first: DaemonProc, hub_server: HubServer, at_stop: int, said: str) -> None:
    record = _record(first.state, "halted")
    pushed = record["last_push"]
    assert pushed is not None and pushed["epoch"] >= at_stop, (record, first.output)
    assert f"halted: pushed and verified at hub me/halted: epoch {pushed['epoch']}" in said
    assert "its trainer keeps running, detached" in said
    # What the record calls verified is on the Hub, byte for byte (the manifest's sha256).
    manifest = json.loads((first.state / "jobs/halted/pushed.json").read_text())
    weights = [f for f in manifest["files"] if f["path"].endswith(".pt")]
    assert weights
    for entry in weights:
        assert hub_server.entry("me/halted", entry["path"]).sha256 == entry["sha256"]
    assert record["status"] == "training"  # detached: the next daemon drives it on
    trainer = json.loads((first.state / "jobs/halted/trainer.json").read_text())
    pid = int(trainer["identity"]["pid"])
    os.kill(pid, 0)  # the trainer trains on (raises if it is gone)


def _finished_by_the_next_daemon(make_daemon: Any) -> None:
    second: DaemonProc = make_daemon()
    trainer = json.loads((second.state / "jobs/halted/trainer.json").read_text())
    pid = int(trainer["identity"]["pid"])
    second.start("--once")
    assert second.wait(timeout=TRAIN_BOUND) == 0, second.output
    assert f"re-attached to the running trainer (pid {pid}" in second.output
    record = _record(second.state, "halted")
    assert record["termination"] == "completed" and record["epoch"] == 4
    assert record["last_push"]["final"] is True and record["last_push"]["epoch"] == 4
