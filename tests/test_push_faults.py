"""Faults on the way to the Hub, each injected by the local server: retried, then verified,
or not counted as verified at all."""

from __future__ import annotations

import hashlib

import pytest

from runspec.clock import parse_utc_iso
from runspec.push.until import push_until_verified
from tests.fixtures_push import FakeRun, MakeRun, wait_until
from tests.hubserver import HubServer


def remote_matches_local(hub: HubServer, run: FakeRun, rel: str) -> bool:
    local = hashlib.sha256((run.run_dir / rel).read_bytes()).hexdigest()
    return hub.entry(f"me/{run.spec.name}", rel).sha256 == local


@pytest.mark.parametrize("mode", ["500", "drop"])
def test_lfs_put_fault_is_retried_by_the_client_then_verified(
    hub_server: HubServer, make_run: MakeRun, mode: str
) -> None:
    run = make_run()
    run.epoch(1, best=False)
    hub_server.fail("lfs_put", mode)
    pushed = run.pusher().push_now(final=False, timeout=120)
    assert pushed is not None
    assert hub_server.count("lfs_put", 0 if mode == "drop" else 500) == 1
    assert remote_matches_local(hub_server, run, "weights/last.pt")
    assert run.reload().push_error is None


@pytest.mark.parametrize("mode", ["500", "drop"])
def test_commit_fault_fails_the_push_and_the_retry_verifies(
    hub_server: HubServer, make_run: MakeRun, mode: str
) -> None:
    run = make_run()
    run.epoch(1, best=False)
    hub_server.fail("commit", mode)
    pusher = run.pusher(retry_base=30.0)
    pusher.notify_checkpoint()
    wait_until(lambda: run.reload().push_error is not None, 60, "the failed push", run)
    assert run.reload().last_push is None
    assert hub_server.files("me/run1") == []
    assert any("push failed, retrying in 30s" in line for line in run.lines)
    failed_at = run.clock.time()
    # A new checkpoint during the backoff does not cut it short...
    run.clock.advance(29)
    run.epoch(2, best=False)
    pusher.notify_checkpoint()
    # ...the retry after it pushes the newest checkpoints and verifies them.
    run.clock.advance(2)
    wait_until(lambda: run.reload().last_push is not None, 60, "the retried push", run)
    record = run.reload()
    assert record.last_push is not None and record.last_push.epoch == 2
    assert parse_utc_iso(record.last_push.time) >= failed_at + 30
    assert record.push_error is None
    assert remote_matches_local(hub_server, run, "weights/last.pt")
    assert remote_matches_local(hub_server, run, "weights/epoch_2.pt")


def test_wrong_sha256_at_the_remote_is_not_counted_as_verified(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    run = make_run()
    run.epoch(1, best=False)
    hub_server.lie_about_sha256("weights/last.pt")
    pusher = run.pusher()
    assert pusher.push_now(final=True, timeout=60) is None
    record = run.reload()
    assert record.last_push is None
    assert record.push_error is not None
    assert "NOT verified" in record.push_error and "weights/last.pt" in record.push_error
    assert not (run.paths.job_dir / "pushed.json").exists()
    # The same files, once the remote tells the truth, verify on the next try.
    hub_server.tell_truth()
    pushed = pusher.push_now(final=True, timeout=60)
    assert pushed is not None and pushed.final
    assert run.reload().push_error is None


def test_wrong_blob_id_of_a_small_file_is_caught_too(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    run = make_run()
    run.epoch(1, best=False)
    hub_server.lie_about_sha256("status.json")
    assert run.pusher().push_now(final=False, timeout=60) is None
    error = run.reload().push_error
    assert error is not None and "status.json" in error


def test_hub_down_for_a_while_then_pushes_catch_up(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    run = make_run()
    run.epoch(1)
    pusher = run.pusher(retry_base=10.0)
    pusher.notify_checkpoint()
    wait_until(lambda: run.reload().last_push is not None, 60, "the first push", run)
    hub_server.down()
    for epoch in (2, 3, 4):
        run.epoch(epoch)
        pusher.notify_checkpoint()  # returns at once: training never waits for the Hub
        wait_until(lambda: run.reload().push_error is not None, 60, "a failed push", run)
        run.clock.advance(1)
    assert run.reload().last_push.epoch == 1  # type: ignore[union-attr]
    assert pusher.pending_bytes() > 0
    hub_server.up()
    run.clock.advance(3600)
    wait_until(lambda: run.reload().last_push.epoch == 4, 60, "the catch-up push", run)  # type: ignore[union-attr]
    record = run.reload()
    assert record.push_error is None
    for rel in ("weights/last.pt", "weights/best.pt", "weights/epoch_2.pt", "weights/epoch_4.pt"):
        assert remote_matches_local(hub_server, run, rel)
    assert pusher.pending_bytes() == 0


def test_a_hung_final_push_says_so_in_push_error(hub_server: HubServer, make_run: MakeRun) -> None:
    run = make_run()
    run.epoch(1, best=False)
    hub_server.fail("commit", "hang")  # the Hub takes the commit and never answers
    pusher = run.pusher()
    pushed = push_until_verified(pusher, final=True, timeout=2.0, clock=run.clock)
    assert pushed is None
    record = run.reload()
    assert record.last_push is None
    assert record.push_error is not None and "slow or hung" in record.push_error
    assert "the final push was not verified within" in record.push_error


def test_files_the_hub_lost_are_sent_again_from_the_local_copy(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    run = make_run()
    run.epoch(2, best=False)
    pusher = run.pusher()
    pusher.notify_checkpoint()
    wait_until(lambda: run.reload().last_push is not None, 60, "the first push", run)
    hub_server.lose_files("me/run1")  # the repo emptied mid-run: its verified files are gone
    run.epoch(4, best=False)
    pusher.notify_checkpoint()
    wait_until(
        lambda: getattr(run.reload().last_push, "epoch", None) == 4, 60, "the next push", run
    )
    assert any("the target lost" in line for line in run.lines)
    assert run.reload().push_error is None
    assert remote_matches_local(hub_server, run, "weights/epoch_2.pt")
    assert remote_matches_local(hub_server, run, "weights/epoch_4.pt")
