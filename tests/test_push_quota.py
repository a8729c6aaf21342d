"""The Hub's commit quota (issue 37): past its limit the Hub answers every commit to the repo
with HTTP 429, "You have exceeded the rate limit for repository commits (128 per hour). You
can retry this action in 43 minutes" (tests/hubserver.py scripts it). Eager pushes (an engine
pushes every checkpoint) with short epochs can reach it, and then the final push fails for up
to an hour. runspec keeps its routine pushes to three quarters of the limit, so the final push
always has room, and honours the time the Hub says.

The limit is scaled down here (8 an hour, in the stand-in and in runspec alike) so that a test
reaches it in a few pushes; nothing else changes with the number.
"""

from __future__ import annotations

import time

import pytest
from huggingface_hub import HfApi

from runspec.clock import SYSTEM, utc_iso
from runspec.preflight import checks
from runspec.push import quota
from runspec.push.until import push_until_verified
from runspec.watch.lease import HubLease, Lease, LeaseError
from tests.fixtures_push import MakeRun, wait_until
from tests.hubserver import HubServer

SMALL = 1_000_000  # checkpoints: still binary (LFS), quick to push


@pytest.fixture
def limit_8(hub_server: HubServer, monkeypatch: pytest.MonkeyPatch) -> HubServer:
    hub_server.limit_commits(8)
    monkeypatch.setattr(quota, "HUB_COMMITS_PER_HOUR", 8)
    return hub_server


def test_eager_pushes_leave_room_for_the_final_one(limit_8: HubServer, make_run: MakeRun) -> None:
    """An engine's pusher (a push after every checkpoint, no minimum interval) over ten
    epochs: the routine pushes stop at 6 of the hour's 8 commits (the first card takes one
    more), and the final push is committed and verified at once."""
    run = make_run(name="eager")
    pusher = run.pusher(eager=True)
    for n in range(1, 11):
        run.epoch(n, size=SMALL)
        pusher.notify_checkpoint()
        if n <= 6:
            wait_until(
                lambda n=n: (p := run.reload().last_push) is not None and p.epoch == n,
                60,
                f"the push of epoch {n}",
                run,
            )
    pushed = pusher.push_now(final=True, timeout=60)
    assert pushed is not None and pushed.final and pushed.epoch == 10, run.lines
    assert limit_8.count("commit", 429) == 0
    assert run.reload().push_error is None


def test_a_quota_refusal_waits_the_time_the_hub_says(limit_8: HubServer, make_run: MakeRun) -> None:
    """Commits runspec did not make (another job on the same repo) spent the hour: the Hub's
    429 is reported with the wait it names, and the retry is not sent before then."""
    run = make_run(name="crowded")
    for _ in range(8):
        limit_8.quota_refusal("me/crowded")  # the hour's commits, made elsewhere
    run.epoch(2, size=SMALL)
    pusher = run.pusher()
    pusher.request_scheduled()
    wait_until(lambda: run.reload().push_error is not None, 60, "the refused push", run)
    error = run.reload().push_error or ""
    assert "commit quota" in error and "retry in 1h00m" in error, error
    said = [line for line in run.lines if "push failed, retrying in" in line]
    assert said and "retrying in 1h00m" in said[0], said
    assert limit_8.count("commit", 429) == 1
    # A push asked for now within that hour is refused by runspec itself, not sent.
    assert pusher.push_now(final=False, timeout=30) is None
    assert limit_8.count("commit", 429) == 1
    assert "commit quota allows the next commit in" in (pusher.last_failure or "")


def test_the_preflight_warns_when_the_cadence_would_cross_the_quota(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    run = make_run(name="chatty", every="20s")
    found = checks.push_check(run.spec, run.paths)
    assert found.status.value == "warn", found
    assert (
        "a push every 20s and a lease renewal every 5m00s make about 192 commits" in found.message
    )
    assert "128" in found.message
    assert "push.every" in found.fix


def test_a_quota_refusal_of_any_commit_holds_the_pushes_too(
    limit_8: HubServer, make_run: MakeRun
) -> None:
    """A commit that is not a push (the lease's renewal, through `HubLease.write`) meets the
    quota: it is refused with the Hub's wait, and the run's pushes to that repo then wait too
    instead of being refused one by one."""
    run = make_run(name="shared")
    run.epoch(2, size=SMALL)
    api = HfApi()
    api.create_repo("me/shared", private=True)
    for _ in range(8):
        limit_8.quota_refusal("me/shared")  # the hour's commits, made elsewhere
    # The lease's own writer, as a renewal calls it.
    fresh = Lease(
        run="shared",
        vouched_until=utc_iso(time.time() + 600),
        state="training",
        epoch=2,
        renewed_at=utc_iso(time.time()),
        lease_s=300.0,
    )
    hub = HubLease("me/shared")
    with pytest.raises(LeaseError, match=r"commit quota.*retry this action in 60 minutes"):
        hub.write(fresh, None, "runspec: lease of shared (training)")
    assert limit_8.count("commit", 429) == 1
    pusher = run.pusher(clock=SYSTEM)  # the same clock as hub_commit's, as in the daemon
    assert pusher.push_now(final=True, timeout=30) is None
    assert "commit quota allows the next commit in" in (pusher.last_failure or "")
    assert limit_8.count("commit", 429) == 1


def test_a_final_push_the_quota_holds_past_its_time_gives_up_at_once(
    limit_8: HubServer, make_run: MakeRun
) -> None:
    """The Hub says to retry in an hour and the final push has two minutes: it is not tried
    again and again until they are spent (the machine would only bill meanwhile); the run's
    push error says why, and the finish's unverified choice can act now."""
    run = make_run(name="late")
    for _ in range(8):
        limit_8.quota_refusal("me/late")
    run.epoch(2, size=SMALL)
    pusher = run.pusher(clock=SYSTEM)
    assert push_until_verified(pusher, final=True, timeout=120, clock=SYSTEM) is None
    assert not [line for line in run.lines if "retrying in" in line], run.lines
    error = run.reload().push_error or ""
    assert "commit quota" in error and "retry in 1h00m" in error, error
    assert limit_8.count("commit", 429) == 1
