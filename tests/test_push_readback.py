"""Read-back before the end: the Hub's sha256 for an LFS file is the one the client declared, so
the final push downloads the final weights again at the verified commit and hashes the bytes the
Hub really serves. A store that rots (the right metadata, the wrong bytes) is caught, the push
stays unverified and is retried; and no push reads back more than the weights it sent."""

from __future__ import annotations

import pytest

from runspec.machine.verdict import run_safety
from runspec.store.state import RunStatus
from tests.fixtures_push import MakeRun
from tests.hubserver import HubServer

# As a rented box pushes: through Xet (tests/hubxet.py).
pytestmark = pytest.mark.usefixtures("xet_on")


def test_a_rotten_copy_on_the_hub_leaves_the_final_push_unverified(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    run = make_run(verify="readback")
    for status in (RunStatus.PREFLIGHT, RunStatus.STAGING, RunStatus.TRAINING):
        run.store.transition(run.record, status, "test")
    run.epoch(2)
    pusher = run.pusher()
    hub_server.corrupt = True
    assert pusher.push_now(final=True, timeout=60) is None
    record = run.reload()
    assert record.last_push is None, "a push whose bytes did not match was called verified"
    assert record.push_error is not None and "read-back: weights/" in record.push_error
    assert "the Hub serves" in record.push_error and "it recorded" in record.push_error
    # The finish gate sees it as what it is: the weights are not safely off the machine.
    assert not run_safety(run.paths, run.spec, record).safe

    hub_server.corrupt = False  # the retry finds the bytes good
    pushed = pusher.push_now(final=True, timeout=60)
    assert pushed is not None and pushed.final
    assert any("read back" in line and "the bytes match" in line for line in run.lines)
    assert run_safety(run.paths, run.spec, run.reload()).safe


def test_each_push_reads_back_what_it_sent_and_no_more(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    """Every push is verified by the bytes the Hub serves of the weights it sent (each one a
    checkpoint the record and the lease may name); a final push that sends no new weights reads
    none again, even with `verify: metadata`."""
    run = make_run(verify="metadata")
    run.epoch(2)
    pusher = run.pusher()
    assert pusher.push_now(final=False, timeout=60) is not None
    weights = [p for p in hub_server.files("me/run1") if p.startswith("weights/")]
    assert len(weights) == 3 and hub_server.count("resolve") == 3
    assert pusher.push_now(final=True, timeout=60) is not None
    assert hub_server.count("resolve") == 3
