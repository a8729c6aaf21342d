"""A hung peer in a run across nodes, found within a bound (issue 35).

A node that freezes (a stopped process, a machine or a network that hangs) kills no
connection: the other node's ranks wait inside their next collective, and gloo's and NCCL's own
timeouts (30 minutes by default) or runspec's no-progress limit (an hour before the first
epoch) would hold the machines, and the budget, that long. So every rank beats in torchrun's
rendezvous store (`runspec/beat/RANK`, a counter, every BEAT seconds, from a thread of its own),
rank 0 watches the ranks of the other nodes, and the first rank of every other node watches
rank 0. A rank whose counter has not moved for `RUNSPEC_PEER_SILENCE` seconds (default 60), or
whose store cannot be reached for as long, is hung: the watcher writes `PeerHung` as its rank's
error and ends its own rank process, so torchrun fails at once and the run ends as when a peer
dies (node 0 pushes its newest checkpoint; under an engine every node exits 75).

Not a hang: a rank that ended its training well says so (`runspec/done`) before it exits, and a
stop rank 0 announced (runspec.trainer.multinode) is heard as one. A rank stuck inside a live
process keeps beating: that is left to the collective's own timeout.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from runspec.errors import Cause
from runspec.trainer.multinode import peer_stopped, run_store, write_rank_error
from runspec.units import plain_int

SILENCE_ENV = "RUNSPEC_PEER_SILENCE"
DEFAULT_SILENCE = 60
BEAT = 2.0  # seconds between two beats of a rank
DONE_KEY = "runspec/done"


class PeerHung(RuntimeError):
    """A rank of another node gave no sign of life for the stated silence."""

    cause = Cause.LINK


def peer_silence() -> int:
    raw = os.environ.get(SILENCE_ENV, "").strip()
    return plain_int(raw) or DEFAULT_SILENCE  # unset, 0 or not a number: the default


def _beat_key(rank: int) -> str:
    return f"runspec/beat/{rank}"


def _connect(timeout: float) -> Any:
    # The run's keys, under its rendezvous id: a stranger on the store beats for no rank.
    return run_store(timeout)


def watched(rank: int, local_world: int, world: int) -> list[int]:
    """Whom this rank watches: rank 0 every rank off node 0, the first rank of every other
    node rank 0; nobody else (node 0's ranks are numbered first)."""
    if rank == 0:
        return list(range(local_world, world))
    if rank >= local_world and rank % local_world == 0:
        return [0]
    return []


class PeerWatch:
    """This rank's beat, and its watch over the ranks `watched` names."""

    def __init__(self, control_dir: Path) -> None:
        self.control_dir = control_dir
        self.rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.others = watched(self.rank, local, self.world) if self.world > local else []
        self.silence = float(peer_silence())
        self._store: Any = None

    def start(self) -> None:
        if self.world <= 1:
            return
        threading.Thread(target=self._run, name="runspec-peer-watch", daemon=True).start()

    def done(self) -> None:
        """This rank ended its training well: a silence after it is no hang."""
        try:
            (self._store or _connect(BEAT * 2)).add(DONE_KEY, 1)
        except Exception:  # the store is gone: the run is over anyway
            return

    def _run(self) -> None:
        seen = {rank: (-1, time.monotonic()) for rank in self.others}
        while True:
            try:
                if self._store is None:
                    self._store = _connect(BEAT * 2)
                self._store.add(_beat_key(self.rank), 1)
                if self._store.add(DONE_KEY, 0) > 0:
                    return  # training ended well somewhere: every rank is ending
                for rank in self.others:
                    count = self._store.add(_beat_key(rank), 0)
                    if count != seen[rank][0]:
                        seen[rank] = (count, time.monotonic())
            except Exception:  # an unreachable store is silence, judged below
                self._store = None
            self._judge(seen)
            time.sleep(BEAT)

    def _judge(self, seen: dict[int, tuple[int, float]]) -> None:
        now = time.monotonic()
        for rank, (_, since) in seen.items():
            if now - since < self.silence or peer_stopped(self.control_dir) is not None:
                continue
            hung = PeerHung(
                f"rank {rank} gave no sign of life for {self.silence:.0f} s ({SILENCE_ENV}): "
                "a hung peer; this rank ends so the run does not wait on it"
            )
            print(f"runspec.trainer: {hung}", flush=True)
            write_rank_error(self.control_dir, hung)
            os._exit(1)  # the main thread waits inside a collective that will never return
