"""One run driver (runspec.run.driver): `runspec run`, the daemon and every engine path build a
run through `build_run`, and nothing else builds a lifecycle, a lease renewer or a run's
timers; the pusher and the renewer keep no timing of their own; who ends the machine is one
typed value (runspec.machineowner) and each of its consequences follows from it."""

from __future__ import annotations

import ast
from pathlib import Path

from runspec.machineowner import RUNSPEC, engine_owned
from runspec.run.driver import build_run
from runspec.spec.model import FinishAction
from runspec.store.owner import RunLock
from runspec.timers import LEASE_ID, Timers, push_every_id
from tests.fixtures_push import MakeRun, wait_until
from tests.hubserver import HubServer
from tests.test_push_schedule import commits

PACKAGE = Path(__file__).resolve().parent.parent / "runspec"
# What wires a run, and where alone it may be built.
WIRING = {"Lifecycle", "LifecycleOptions", "LeaseRenewer", "renewer_for", "Ticker"}
ALLOWED = {
    "run/driver.py": WIRING,
    "run/lifecycle.py": {"LifecycleOptions"},  # its default options
    "watch/renew.py": {"LeaseRenewer"},  # inside renewer_for
}


def _calls(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute):
                names.add(func.attr)
    return names


def test_every_run_is_built_by_the_driver_and_nowhere_else() -> None:
    built_elsewhere = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        found = (_calls(path) & WIRING) - ALLOWED.get(rel, set())
        if found:
            built_elsewhere[rel] = sorted(found)
    assert built_elsewhere == {}, "a run wired outside runspec/run/driver.py"
    # Both callers go through it (and the pusher is the lifecycle's, never theirs).
    for caller in ("commands/run.py", "daemon/runs.py"):
        calls = _calls(PACKAGE / caller)
        assert "build_run" in calls, caller
        assert "Pusher" not in calls, caller


def test_no_timing_mode_of_their_own_in_the_pusher_and_the_renewer() -> None:
    """Each is timed by the run's scheduler, run by whoever drives the run: no pusher that runs
    timers, no renewer with a loop of its own."""
    pusher = (PACKAGE / "push/pusher.py").read_text()
    renewer = (PACKAGE / "watch/renew.py").read_text()
    assert "run_due" not in pusher and "Timers(" not in pusher
    assert "def start" not in renewer and "def _loop" not in renewer


def test_the_run_wiring_is_formatted_normally_and_stays_under_the_cap() -> None:
    """No `# fmt: skip` packs these modules under the 400-line cap (`ruff format --check`
    passes over the whole tree)."""
    for rel in (
        "run/driver.py",
        "daemon/runs.py",
        "daemon/loop.py",
        "push/pusher.py",
        "push/proven.py",
        "watch/renew.py",
        "commands/run.py",
        "commands/daemonstop.py",
        "machineowner.py",
        "timers.py",
    ):
        text = (PACKAGE / rel).read_text()
        assert "fmt: skip" not in text, rel
        assert len(text.splitlines()) <= 400, rel


def test_under_an_engine_the_run_is_built_with_the_engines_end(make_run: MakeRun) -> None:
    run = make_run(target="dir", every="15m")
    drive = build_run(
        run.spec,
        run.paths,
        run.store,
        owner=engine_owned("dstack", eager_push=True),
        progress=run.lines.append,
        lock=RunLock(run.paths),
        clock=run.clock,
    )
    try:
        assert drive.spec.finish.action is FinishAction.NONE  # nothing ends the machine
        assert drive.lifecycle.requests.interrupt_grace == 0.0  # a stop ends the trainer now
        pusher = drive.lifecycle.pusher()
        assert pusher is not None
        assert pusher.eager and pusher.min_interval == 0.0
        assert pusher.timers is drive.timers and drive.ticker is not None
    finally:
        drive.lifecycle._stop_pusher()
        drive.close()


def test_the_daemons_run_is_timed_by_the_daemons_scheduler(make_run: MakeRun) -> None:
    run = make_run(target="dir", every="15m")
    daemon_timers = Timers(run.clock)
    drive = build_run(
        run.spec,
        run.paths,
        run.store,
        owner=RUNSPEC,
        progress=run.lines.append,
        lock=RunLock(run.paths),
        clock=run.clock,
        timers=daemon_timers,
    )
    try:
        assert drive.ticker is None and drive.timers is daemon_timers
        assert drive.spec.finish == run.spec.finish
        assert drive.lifecycle.requests.interrupt_grace is None
        pusher = drive.lifecycle.pusher()
        assert pusher is not None and pusher.timers is daemon_timers
        assert not pusher.eager and pusher.min_interval == 60.0
        assert daemon_timers.armed(push_every_id(run.spec.name))
    finally:
        drive.lifecycle._stop_pusher()
        drive.close()
        daemon_timers.close()


def test_runspec_runs_own_scheduler_pushes_every_and_renews_the_lease(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    """`runspec run`'s driver: the lease renewed at its start and every lease after, and
    `push.every` pushing, with only the driver's ticker running the run's timers."""
    run = make_run(every="15m")  # the Hub stand-in; the spec's lease is the default
    drive = build_run(
        run.spec,
        run.paths,
        run.store,
        owner=RUNSPEC,
        progress=run.lines.append,
        lock=RunLock(run.paths),
        clock=run.clock,
    )
    renewer = drive.renewer
    assert renewer is not None
    try:
        drive.start()
        assert drive.timers.armed(LEASE_ID)
        wait_until(lambda: renewer.renewals >= 1, 60, "the first lease", run)
        run.clock.advance(renewer.interval + 1)
        wait_until(lambda: renewer.renewals >= 2, 60, "the next lease, on the ticker", run)
        run.epoch(1)
        pusher = drive.lifecycle.pusher()
        assert pusher is not None
        run.clock.advance(15 * 60 + 1)
        wait_until(lambda: "runspec: epoch 1" in commits(hub_server, run), 60, "push.every", run)
    finally:
        drive.lifecycle._stop_pusher()
        drive.close()
    assert not drive.timers.armed(LEASE_ID)
