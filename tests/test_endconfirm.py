"""The end's confirmation beside the receipt (runspec/end.json): the box adds the end its
provider confirmed, once a final push verified; an end nobody confirmed adds nothing. (The
watcher's side: tests/test_watch.py, test_an_expired_lease_stops_the_box_and_records_it.)"""

from __future__ import annotations

import json

from runspec.providers.base import ProviderOutcome
from runspec.push.endconfirm import send_end
from runspec.store.finishrecord import EndAction, FinishRecord, FinishResult
from tests.fixtures_push import MakeRun

AT = 1_800_000_000.0


def _stop(confirmed: bool = True, dry_run: bool = False) -> FinishRecord:
    """The record a stop through vast leaves (runspec.machine.finish: the provider's Outcome)."""
    call = "PUT /instances/4242"
    outcome = ProviderOutcome("vast", "stop", "4242", call, confirmed, "stopped", "")
    result = FinishResult(
        requested="stop",
        action=EndAction.STOP,
        verified=True,
        dry_run=dry_run,
        ok=True,
        plan="stop vast instance 4242",
        summary="stopped",
        provider=outcome.to_json(),
    )
    return FinishRecord.applied(result)


def test_the_box_adds_the_end_its_provider_confirmed_beside_the_receipt(
    make_run: MakeRun,
) -> None:
    run = make_run("dir")
    run.epoch(2)
    said: list[str] = []
    end_file = run.paths.state / "pushed" / run.spec.name / "runspec" / "end.json"
    assert send_end(run.spec, run.paths, _stop(), said.append, AT) is False  # no final push
    assert run.pusher().push_now(final=True, timeout=60) is not None
    for unseen in (_stop(confirmed=False), _stop(dry_run=True), None):
        assert send_end(run.spec, run.paths, unseen, said.append, AT) is False
    assert not end_file.exists()

    assert send_end(run.spec, run.paths, _stop(), said.append, AT) is True
    end = json.loads(end_file.read_text())
    assert end["confirmed"] is True and end["by"] == "box" and end["action"] == "stop"
    assert (end["run"], end["provider"], end["instance"]) == (run.spec.name, "vast", "4242")
    assert end["state"] == "stopped" and end["at"] == "2027-01-15T08:00:00+00:00"
    assert any("the end's confirmation pushed" in line for line in said)
