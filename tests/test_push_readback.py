"""Read-back before the end: the Hub's sha256 for an LFS file is the one the client declared, so
the final push downloads the final weights again at the verified commit and hashes the bytes the
Hub really serves. A store that rots (the right metadata, the wrong bytes) is caught, the push
stays unverified and is retried; and nothing is read back when it is not asked for."""

from __future__ import annotations

from runspec.machine.verdict import run_safety
from runspec.store.state import RunStatus
from tests.fixtures_push import MakeRun
from tests.hubserver import HubServer


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


def test_only_a_final_push_that_asks_for_it_reads_back(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    run = make_run(verify="metadata")
    run.epoch(2)
    pusher = run.pusher()
    assert pusher.push_now(final=False, timeout=60) is not None
    assert pusher.push_now(final=True, timeout=60) is not None
    assert hub_server.count("resolve") == 0
