"""record.finish has one shape, the endgame's step (issue 20): applying, applied, deferred; a
record written in one of the three older shapes reads as the step it was."""

from __future__ import annotations

from runspec.machine.finish import FinishResult
from runspec.store.finishrecord import FinishRecord, FinishStep

STOPPED = FinishResult("destroy", "stop", False, False, True, "PUT", "stop: vast reports stopped")


def test_each_step_reads_back_as_written() -> None:
    for written in (
        FinishRecord.applying("destroy"),
        FinishRecord.applied(STOPPED),
        FinishRecord.deferred("run b is queued"),
    ):
        assert FinishRecord.from_json(written.to_json()) == written
    data = FinishRecord.applied(STOPPED).to_json()
    assert data["step"] == "applied" and data["action"] == "stop" and data["ok"] is True


def test_the_older_shapes_read_as_their_step() -> None:
    begun = FinishRecord.from_json({"step": "applying", "action": "command"})
    assert begun is not None and begun.step is FinishStep.APPLYING and begun.action == "command"
    done = FinishRecord.from_json(STOPPED.to_json())
    assert done is not None and done.step is FinishStep.APPLIED and done.result == STOPPED
    waiting = FinishRecord.from_json({"deferred": True, "why": "x", "summary": "deferred: x"})
    assert waiting is not None and waiting.step is FinishStep.DEFERRED and waiting.why == "x"
    assert FinishRecord.from_json({}) is None


def test_an_end_that_ran_out_of_tries_is_unconfirmed() -> None:
    ran_out = FinishResult("destroy", "destroy", True, False, False, "DELETE", "not confirmed")
    assert FinishRecord.applied(ran_out).unconfirmed_end
    assert not FinishRecord.applied(STOPPED).unconfirmed_end
    assert not FinishRecord.deferred("queued").unconfirmed_end
