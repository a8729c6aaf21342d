"""When pushes happen: after checkpoints worth pushing, every `push.every`, never more than
one commit per minimum interval."""

from __future__ import annotations

import time

from tests.fixtures_push import FakeRun, MakeRun, wait_until
from tests.hubserver import HubServer


def verified_epoch(run: FakeRun) -> int | None:
    """The epoch of the last verified push: a commit on the server is not yet verified."""
    pushed = run.reload().last_push
    return pushed.epoch if pushed is not None else None


def commits(hub: HubServer, run: FakeRun) -> list[str]:
    """The pushes' commits (the first card's own commit after the first push left out)."""
    repo = hub.repos.get(("model", f"me/{run.spec.name}"))
    found = [msg for _, _, msg in repo.commits] if repo else []
    return [msg for msg in found if msg != "runspec: model card"]


def test_checkpoint_rules(hub_server: HubServer, make_run: MakeRun) -> None:
    run = make_run(every="15m")
    run.epoch(1)
    pusher = run.pusher()
    pusher.notify_checkpoint()  # nothing pushed yet: the first checkpoint goes out
    wait_until(lambda: verified_epoch(run) == 1, 60, "the first push", run)

    # Epoch 3: only last.pt changed, and a push happened less than `every` ago: no push.
    run.epoch(3, best=False)
    pusher.notify_checkpoint()
    # Epoch 4: a new epoch_4.pt: push.
    run.epoch(4, best=False)
    pusher.notify_checkpoint()
    wait_until(lambda: verified_epoch(run) == 4, 60, "the epoch_4 push", run)
    assert commits(hub_server, run)[-1] == "runspec: epoch 4"

    # Epoch 5: best improved: push.
    run.epoch(5, best=True)
    pusher.notify_checkpoint()
    wait_until(lambda: verified_epoch(run) == 5, 60, "the best.pt push", run)

    # Epoch 7: only last.pt, but `every` has passed since the last push: push.
    run.epoch(7, best=False)
    run.clock.advance(15 * 60)
    pusher.notify_checkpoint()
    wait_until(lambda: verified_epoch(run) == 7, 60, "the last.pt push", run)
    assert commits(hub_server, run) == [
        "runspec: epoch 1",
        "runspec: epoch 4",
        "runspec: epoch 5",
        "runspec: epoch 7",
    ]


def test_last_pt_alone_waits_for_every(hub_server: HubServer, make_run: MakeRun) -> None:
    run = make_run(every="15m")
    run.epoch(1)
    pusher = run.pusher()
    assert pusher.push_now(final=False, timeout=60) is not None
    run.epoch(3, best=False)
    pusher.notify_checkpoint()
    # The final push is served after the checkpoint request was looked at.
    final = pusher.push_now(final=True, timeout=60)
    assert final is not None and final.epoch == 3
    assert commits(hub_server, run) == ["runspec: epoch 1", "runspec: epoch 3 (final)"]


def test_commits_coalesce_to_one_per_min_interval(hub_server: HubServer, make_run: MakeRun) -> None:
    run = make_run()
    run.epoch(2)
    pusher = run.pusher(min_interval=60.0)
    pusher.notify_checkpoint()
    wait_until(lambda: verified_epoch(run) == 2, 60, "the first push", run)
    for epoch in (4, 6, 8):  # three pushable checkpoints inside one minute
        run.epoch(epoch)
        pusher.notify_checkpoint()
        run.clock.advance(10)
    time.sleep(1.5)  # three worker wake-ups: had it pushed early, a commit would be there
    assert len(commits(hub_server, run)) == 1
    run.clock.advance(31)
    wait_until(lambda: verified_epoch(run) == 8, 60, "the coalesced push", run)
    assert commits(hub_server, run)[-1] == "runspec: epoch 8"
    for rel in ("weights/epoch_4.pt", "weights/epoch_6.pt", "weights/epoch_8.pt"):
        assert rel in hub_server.files("me/run1")


def test_the_schedule_pushes_changed_run_files_every_interval(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    """`push.every` is read from the one clock seam: nothing before it, a push after it."""
    run = make_run(every="15m")
    run.epoch(1)
    pusher = run.pusher()
    assert pusher.push_now(final=False, timeout=60) is not None
    with (run.run_dir / "train.log").open("a") as fh:
        fh.write("a line written between epochs\n")
    local = (run.run_dir / "train.log").read_bytes()
    run.clock.advance(14 * 60)
    time.sleep(1.5)  # three worker wake-ups: had it pushed early, a commit would be there
    assert len(commits(hub_server, run)) == 1
    run.clock.advance(61)
    wait_until(
        lambda: hub_server.read_file("me/run1", "train.log") == local, 30, "a scheduled push", run
    )
    assert len(commits(hub_server, run)) == 2
    # With nothing new, the next interval sends nothing: no empty commits.
    run.clock.advance(15 * 60 + 1)
    time.sleep(1.5)
    assert len(commits(hub_server, run)) == 2
