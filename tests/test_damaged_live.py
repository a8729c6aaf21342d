"""A damaged record with a live trainer (issue 19.5): the daemon rebuilds the run's record from
its job folder's other files and drives it to its end, so its newest checkpoints still reach
the Hub; the rebuilt run never lets the machine be destroyed: the end is a stop."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from runspec.store.state import RunRecord, unnamed_edges
from tests.fixtures_daemon import DaemonProc, drop, wait_until
from tests.fixtures_providers import StandIn, vast_answers_stopped
from tests.fixtures_run import base_spec, merge
from tests.hubserver import HubServer

pytestmark = pytest.mark.training

GARBAGE = b"\x8f\x01\xff\xfe\x00\x13\x88\x9a not a record"
EPOCHS = 5


def trainer_pid(state: Path, name: str) -> int:
    saved = json.loads((state / "jobs" / name / "trainer.json").read_text())
    return int(saved["identity"]["pid"])


@pytest.mark.timeout(600)
def test_a_live_trainer_under_a_damaged_record_is_driven_to_its_end_and_stopped(
    make_daemon: Any, hub_server: HubServer, standin: StandIn, provider_env: dict[str, str]
) -> None:
    vast_answers_stopped(standin)
    env = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "vast-key-live"}
    doc = merge(base_spec("mended", EPOCHS), {
        "push": {"hub": {"repo": "me/mended"}},
        "finish": {"action": "destroy", "provider": "vast"},
    })  # fmt: skip
    first: DaemonProc = make_daemon()
    drop(first.inbox, "mended.yaml", yaml.safe_dump(doc, sort_keys=False))
    first.start(env=env)
    wait_until(lambda: ((first.record("mended") or {}).get("last_push") or {}).get("epoch"),
               timeout=300, what="the first verified push")  # fmt: skip
    # The trainer held still, so the damage lands while it lives and has epochs to go.
    pid = trainer_pid(first.state, "mended")
    os.kill(pid, signal.SIGSTOP)
    try:
        before = first.record("mended") or {}
        pushed_at = before["last_push"]["epoch"]  # type: ignore[index]
        assert pushed_at < EPOCHS
        first.signal(signal.SIGTERM)  # the daemon detaches: the trainer keeps running
        assert first.wait(timeout=120) == 0, first.output
        record = first.state / "jobs" / "mended" / "record.json"
        record.write_bytes(GARBAGE)

        again: DaemonProc = make_daemon()
        again.start("--once", env=env)
        wait_until(lambda: "mended: its record is damaged" in again.output, timeout=120,
                   what="the damage seen")  # fmt: skip
    finally:
        os.kill(pid, signal.SIGCONT)
    assert again.wait(timeout=480) == 0, again.output
    # The epochs trained after the damage reached the Hub.
    at_hub = hub_server.files("me/mended")
    assert f"weights/epoch_{EPOCHS}.pt" in at_hub, (at_hub, again.output)
    assert again.output.count("rebuilt from its job folder") == 1, again.output  # said once
    kept = list(record.parent.glob("record.damaged-*.json"))
    assert len(kept) == 1 and kept[0].read_bytes() == GARBAGE  # kept aside, never deleted

    mended = again.record("mended") or {}
    assert mended["status"] == "finished", again.output
    # Rebuilt with the run's own deadline, not the trainer's earlier stop time (issue 38).
    assert mended["deadline"] == before["deadline"], (before["deadline"], mended["deadline"])
    # Every status change went through the transition table, the rebuild by its named edge.
    assert unnamed_edges(RunRecord.from_json(mended).history) == [], mended["history"]
    assert [h["via"] for h in mended["history"] if "via" in h] == ["rebuild"], mended["history"]
    push = mended["last_push"]
    assert isinstance(push, dict) and push["final"] and push["epoch"] == EPOCHS > pushed_at
    # Rebuilt: not trusted for a destroy; the machine is stopped, its disk kept.
    assert standin.made("DELETE") == [] and len(standin.made("PUT")) == 1, again.output
    assert mended["finish"]["action"] == "stop" and mended["finish"]["ok"]
    assert "mended's record was rebuilt after it was damaged" in again.output, again.output
