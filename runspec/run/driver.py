"""The one place a run is wired up, for `runspec run`, the daemon and every engine path: the
lifecycle (and through it the pusher), the lease renewer and the timers that time them, built
once, each with one timing mode, and who ends the machine decided once (runspec.machineowner).

Every timed job of the run (its `push.every`, its lease) is a job of one `Timers`: the daemon's,
which its loop runs, or under `runspec run` one of the run's own, run by a `Ticker` thread. The
pusher and the renewer never keep a timing of their own.

Under an engine the spec runs with no finish action (no provider key is checked, no failsafe
fires, nothing ends the machine; the accepted spec on disk is unchanged), the lease names no
instance, a stop signal ends the trainer at once (its newest checkpoint pushed first), and where
the engine's grace is short every checkpoint is pushed as soon as it is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from runspec.clock import SYSTEM, Clock
from runspec.machineowner import MachineOwner
from runspec.run.lifecycle import Lifecycle, LifecycleOptions
from runspec.spec.model import FinishSpec, Spec
from runspec.store.owner import RunLock
from runspec.store.paths import RunPaths
from runspec.store.state import RecordStore
from runspec.timers import LEASE_ID, Ticker, Timers
from runspec.watch.renew import LeaseRenewer, renewer_for


@dataclass
class RunDrive:
    """A run as built to be driven: run `lifecycle.run()` between `start()` and `close()`."""

    lifecycle: Lifecycle
    renewer: LeaseRenewer | None
    timers: Timers
    ticker: Ticker | None  # `runspec run`'s, running `timers`; None: the daemon's loop runs them

    @property
    def spec(self) -> Spec:
        return self.lifecycle.spec

    def start(self) -> None:
        """The run's timers running, and its lease renewed every lease from now: the first
        renewal at once (it makes the repo), so a box that hangs in its preflight, its staging
        or its first epoch is watched too."""
        if self.ticker is not None:
            self.ticker.start()
        renewer = self.renewer
        if renewer is not None:
            self.timers.every(LEASE_ID, renewer.interval, renewer.kick)
            renewer.kick()

    def stop_lease(self) -> None:
        """No more renewals (cheap: the final state is `final_lease`'s)."""
        self.timers.cancel(LEASE_ID)

    def final_lease(self) -> None:
        """The run's final state into its lease, waiting a bounded time (FINAL_WAIT_S)."""
        self.stop_lease()
        if self.renewer is not None:
            self.renewer.finish()

    def close(self) -> None:
        """`runspec run`'s end: the final lease written, the run's own timers stopped."""
        self.final_lease()
        if self.ticker is not None:
            self.ticker.stop()
            self.timers.close()  # its own: nothing else arms jobs in it


def build_run(
    spec: Spec,
    paths: RunPaths,
    store: RecordStore,
    *,
    owner: MachineOwner,
    progress: Callable[[str], None],
    lock: RunLock,
    clock: Clock = SYSTEM,
    timers: Timers | None = None,
    finish_dry_run: bool = False,
    notify: tuple[str, ...] = (),
) -> RunDrive:
    """The run's parts, wired: `timers` the daemon's (its loop runs them), or None for a run
    driven in the foreground (a scheduler of its own and a ticker thread to run it)."""
    if not owner.runspec:
        spec = dataclasses.replace(spec, finish=FinishSpec())
    ticker = None
    if timers is None:
        ticker = Ticker(Timers(clock), name=f"timers-{spec.name}")
        timers = ticker.timers
    options = LifecycleOptions(
        owner=owner,
        finish_dry_run=finish_dry_run,
        progress=progress,
        notify=notify,
        timers=timers,
    )
    lifecycle = Lifecycle(spec, paths, store, options, clock=clock, lock=lock)
    if not owner.runspec:
        lifecycle.requests.interrupt_grace = 0.0  # the engine's SIGKILL comes within seconds
    renewer = renewer_for(
        spec,
        paths,
        store,
        clock=clock,
        say=progress,
        owner=owner,
        on_ended=lifecycle.requests.interrupted.set,  # a watcher ended it: push and stop
    )
    return RunDrive(lifecycle, renewer, timers, ticker)
