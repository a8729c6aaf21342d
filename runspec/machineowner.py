"""Who ends the machine a run is on: one typed value, decided once where a run starts
(runspec.run.driver) and handed to every part that acts on it.

runspec owns it on a machine it rents itself: its finish action, its failsafe, and a lease that
names the provider and instance (a watcher may stop it). An engine (SkyPilot, dstack, HF Jobs)
owns it under that engine: no finish, no failsafe, no provider named in the lease, a stop signal
ends the trainer at once, and where the engine's grace is short every checkpoint is pushed as
soon as it is written (runspec.engines.onbox).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MachineOwner:
    engine: str | None = None  # the engine's name for people ("SkyPilot"); None: runspec
    eager_push: bool = False  # the engine's grace is short: push every checkpoint as written

    @property
    def runspec(self) -> bool:
        """True when runspec ends the machine (its finish, its failsafe, its provider)."""
        return self.engine is None

    @property
    def push_min_interval(self) -> float:
        """Seconds between commits: the Hub limits their rate, unless every checkpoint must
        be out before a short grace ends."""
        return 0.0 if self.eager_push else 60.0


RUNSPEC = MachineOwner()


def engine_owned(title: str, eager_push: bool) -> MachineOwner:
    return MachineOwner(engine=title, eager_push=eager_push)
