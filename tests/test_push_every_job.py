"""`push.every` is a job in the daemon's one scheduler (runspec.timers): armed when the run's
pusher starts, removed when it stops, counted from the last verified push, and re-armed at a
restart from the record's last push. The clock is moved, never slept on: the daemon's loop
runs the due job here by calling `run_due`, as it does at each step. Without a daemon
(`runspec run`) the pusher runs the same job in a scheduler of its own:
tests/test_push_schedule.py shows that schedule."""

from __future__ import annotations

from runspec.clock import parse_utc_iso
from runspec.run.lifecycle import Lifecycle, LifecycleOptions
from runspec.timers import Timers, push_every_id
from tests.fixtures_push import MakeRun, wait_until
from tests.hubserver import HubServer
from tests.test_push_schedule import commits

EVERY = 15 * 60.0


def test_the_daemons_scheduler_holds_each_runs_push_every(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    run = make_run(every="15m")
    timers = Timers(run.clock)  # the daemon's: only its loop runs the due jobs
    job = push_every_id(run.spec.name)
    run.epoch(1)
    pusher = run.pusher(timers=timers)
    assert timers.due_at(job) == run.clock.time() + EVERY  # armed when the pusher starts
    run.clock.advance(5 * 60)
    assert pusher.push_now(final=False, timeout=60) is not None
    # A verified push moves the schedule: `every` counts from it.
    assert timers.due_at(job) == run.clock.time() + EVERY
    with (run.run_dir / "train.log").open("a") as fh:
        fh.write("a line written between epochs\n")
    run.clock.advance(EVERY - 1)
    assert timers.run_due() == 0
    run.clock.advance(1)
    assert timers.run_due() == 1  # the loop's step: the pusher is asked, its worker pushes
    wait_until(lambda: len(commits(hub_server, run)) == 2, 60, "the scheduled push", run)
    local = (run.run_dir / "train.log").read_bytes()
    assert hub_server.read_file("me/run1", "train.log") == local
    pusher.stop()
    assert not timers.armed(job)  # the run's end removes it
    timers.close()


def test_a_restart_re_arms_the_schedule_from_the_records_last_push(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    run = make_run(every="15m")
    run.epoch(1)
    first = run.pusher(timers=Timers(run.clock))
    assert first.push_now(final=False, timeout=60) is not None
    first.stop()  # the daemon stops (a restart, an upgrade)
    pushed_at = parse_utc_iso(run.reload().last_push.time)  # type: ignore[union-attr]
    run.clock.advance(10 * 60)  # down for ten minutes
    run.record = run.reload()
    timers = Timers(run.clock)  # the new daemon's scheduler holds nothing from before
    run.pusher(timers=timers)
    assert timers.due_at(push_every_id(run.spec.name)) == pushed_at + EVERY
    timers.close()


def test_the_lifecycle_hands_its_pusher_the_daemons_scheduler(make_run: MakeRun) -> None:
    run = make_run(target="dir", every="15m")
    timers = Timers(run.clock)
    lifecycle = Lifecycle(
        run.spec, run.paths, run.store, LifecycleOptions(timers=timers), clock=run.clock
    )
    run.epoch(1)
    pusher = lifecycle.pusher()
    assert pusher is not None and pusher.timers is timers
    assert timers.armed(push_every_id(run.spec.name))
    lifecycle._stop_pusher()
    assert not timers.armed(push_every_id(run.spec.name))
    timers.close()
