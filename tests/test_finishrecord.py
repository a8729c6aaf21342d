"""record.finish has one shape, the endgame's step (issue 20): applying, applied, deferred; a
record written in one of the three older shapes reads as the step it was."""

from __future__ import annotations

import json
from pathlib import Path

from runspec.machine.finish import FinishResult
from runspec.machine.machinefile import load_pending
from runspec.spec.model import FinishAction, FinishSpec
from runspec.store.finishrecord import EndAction, FinishRecord, FinishStep
from runspec.store.paths import StateLayout

STOPPED = FinishResult(
    "destroy", EndAction.STOP, False, False, True, "PUT", "stop: vast reports stopped"
)


def test_each_step_reads_back_as_written() -> None:
    for written in (
        FinishRecord.applying(EndAction.DESTROY),
        FinishRecord.applied(STOPPED),
        FinishRecord.deferred("run b is queued"),
    ):
        assert FinishRecord.from_json(written.to_json()) == written
    data = FinishRecord.applied(STOPPED).to_json()
    assert data["step"] == "applied" and data["action"] == "stop" and data["ok"] is True


def test_the_older_shapes_read_as_their_step() -> None:
    begun = FinishRecord.from_json({"step": "applying", "action": "command"})
    assert begun is not None and begun.step is FinishStep.APPLYING
    assert begun.action is EndAction.COMMAND
    done = FinishRecord.from_json(STOPPED.to_json())
    assert done is not None and done.step is FinishStep.APPLIED and done.result == STOPPED
    waiting = FinishRecord.from_json({"deferred": True, "why": "x", "summary": "deferred: x"})
    assert waiting is not None and waiting.step is FinishStep.DEFERRED and waiting.why == "x"
    assert FinishRecord.from_json({}) is None


def test_an_end_that_ran_out_of_tries_is_unconfirmed() -> None:
    ran_out = FinishResult(
        "destroy", EndAction.DESTROY, True, False, False, "DELETE", "not confirmed"
    )
    assert FinishRecord.applied(ran_out).unconfirmed_end
    assert not FinishRecord.applied(STOPPED).unconfirmed_end
    assert not FinishRecord.deferred("queued").unconfirmed_end


def test_the_chosen_action_is_typed_and_its_record_keeps_the_string() -> None:
    """The action is an EndAction in memory and its plain string on disk (issue 38); an action
    that is none of them (a damaged or hostile file) is no action, never a guess."""
    data = json.loads(json.dumps(FinishRecord.applied(STOPPED).to_json()))
    assert data["action"] == "stop" and isinstance(data["action"], str)
    read = FinishRecord.from_json(data)
    assert read is not None and read.action is EndAction.STOP
    assert read.result is not None and read.result.action is EndAction.STOP
    odd = FinishRecord.from_json({**data, "action": "melt"})
    assert odd is not None and odd.action is None and odd.result is None
    assert f"finish: {EndAction.DESTROY}" == "finish: destroy"


def test_an_older_machine_file_loads_its_action_typed(tmp_path: Path) -> None:
    """A machine.json an older runspec wrote (the action a bare string) loads as before."""
    layout = StateLayout(tmp_path)
    spec = FinishSpec(action=FinishAction.STOP, provider="vast")
    pending = {
        "run": "a",
        "finish": spec.to_json(),
        "hourly_cost": None,
        "weights": "",
        "why": "test",
        "armed_at": "2026-12-03T00:00:00+00:00",
        "step": "applying",
        "action": "stop",
    }
    layout.machine_file.write_text(json.dumps({"schema": 1, "pending": pending}))
    loaded = load_pending(layout)
    assert loaded is not None and loaded.action is EndAction.STOP
