"""A damaged record never stops the daemon: that run is set aside (the file kept beside it, the
reason in `runspec status`), the other runs go on, and while it is there the machine is never
destroyed: a destroy becomes the stop that keeps the disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runspec.clock import SYSTEM
from runspec.run.accept import accept
from runspec.spec.loader import load_spec_text
from tests.fixtures_daemon import DaemonProc, runspec_cli, spec_text
from tests.fixtures_providers import StandIn, vast_answers_stopped
from tests.hubserver import HubServer

EIGHT_BYTES = b"\x8f\x01\xff\xfe\x00\x13\x88\x9a"


def test_a_damaged_record_is_set_aside_and_blocks_the_destroy_not_the_stop(
    make_daemon: Any, hub_server: HubServer, standin: StandIn, provider_env: dict[str, str]
) -> None:
    vast_answers_stopped(standin)
    daemon: DaemonProc = make_daemon()
    ends = "finish:\n  action: destroy\n  provider: vast\npush:\n  hub: {repo: me/damaged}\n"
    for name in ("broken", "fine"):
        text = spec_text(name).replace("finish:\n  action: none\n", ends)
        accept(load_spec_text(text, f"{name}.yaml"), daemon.state, None, SYSTEM)
    record = daemon.state / "jobs" / "broken" / "record.json"
    with record.open("r+b") as fh:  # eight random bytes into the middle of it
        fh.seek(40)
        fh.write(EIGHT_BYTES)
    env = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "vast-key-damaged"}
    daemon.start("--once", env=env)
    assert daemon.wait() == 0, daemon.output
    assert "broken: its record is damaged" in daemon.output
    kept = list(record.parent.glob("record.damaged-*.json"))
    assert len(kept) == 1 and EIGHT_BYTES in kept[0].read_bytes()  # kept, not overwritten
    fine = json.loads((daemon.state / "jobs" / "fine" / "record.json").read_text())
    assert fine["status"] == "finished"  # the other run went on
    assert standin.made("DELETE") == [] and len(standin.made("PUT")) == 1
    assert fine["finish"]["action"] == "stop" and fine["finish"]["ok"]

    status = runspec_cli("status", "--state", str(daemon.state))
    assert status.returncode == 0, status.stderr
    assert "broken  DAMAGED" in status.stdout
    assert "broken: record damaged (" in status.stdout and "runspec rm broken" in status.stdout
    # A daemon started again finds the same: no crash loop, nothing applied.
    again: DaemonProc = make_daemon()
    again.start("--once", env=env)
    assert again.wait() == 0, again.output
    assert standin.made("DELETE") == [] and len(standin.made("PUT")) == 1


def test_status_and_cancel_answer_with_a_damaged_record_and_no_daemon(tmp_path: Path) -> None:
    state = tmp_path / "state"
    accept(load_spec_text(spec_text("torn"), "torn.yaml"), state, None, SYSTEM)
    (state / "jobs" / "torn" / "record.json").write_text('{"name": "torn", "status": "trai')
    out = runspec_cli("status", "--json", "--state", str(state))
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)["runs"]
    assert row["name"] == "torn" and row["status"] == "damaged"
    cancel = runspec_cli("cancel", "torn", "--state", str(state))
    assert cancel.returncode == 1 and "its record is damaged" in cancel.stderr
