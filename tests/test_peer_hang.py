"""A hung peer in a run across two nodes is found within a stated bound (issue 35): a node
that freezes (every process of it stopped, as a frozen machine or a hung network leaves them)
kills no connection, and node 0's ranks used to wait inside their next collective for gloo's
30-minute timeout, holding the budget. Real torchrun on gloo, real LibreYOLO training on two
`runspec run`s on 127.0.0.1 (tests/test_engine_multinode.py), the stand-in Hub."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

import psutil
import pytest

from runspec.trainer.peerwatch import watched
from tests.fixtures_run import finish_run, wait_record
from tests.hubserver import HubServer
from tests.test_engine_multinode import Pair, _dstack, start_pair

__all__ = ["start_pair"]  # the fixture, used here by name

SILENCE = 20  # RUNSPEC_PEER_SILENCE for the test: a third of the default's wait


def _freeze(pid: int) -> None:
    """Every process of a node stopped where it stands (SIGSTOP; the fixture's SIGKILL ends
    them at teardown)."""
    parent = psutil.Process(pid)
    for each in [parent, *parent.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            each.send_signal(signal.SIGSTOP)


def test_whom_each_rank_watches() -> None:
    # Two nodes of two ranks: rank 0 watches node 1's, node 1's first rank watches rank 0.
    assert watched(0, 2, 4) == [2, 3]
    assert watched(1, 2, 4) == [] and watched(3, 2, 4) == []
    assert watched(2, 2, 4) == [0]


@pytest.mark.training
def test_a_frozen_node_ends_node_0_within_the_stated_silence(
    tmp_path: Path, start_pair: Pair, hub_server: HubServer
) -> None:
    def engine(rank: int, port: int) -> dict[str, str]:
        return {**_dstack(rank, port), "RUNSPEC_PEER_SILENCE": str(SILENCE)}

    node0, node1 = start_pair("frozen", 30, engine)
    record = wait_record(tmp_path / "n0", "frozen", lambda r: r["epoch"] >= 1, timeout=400)
    _freeze(node1.pid)
    # Bounded by the silence and torchrun's teardown, far inside the 30-minute collective
    # timeout and the run's 30-minute budget: a wait past 240 s fails the test.
    code0, out0 = finish_run(node0, timeout=240)
    assert code0 == 75, out0[-4000:]  # under dstack: a fresh pair of machines
    assert "PeerHung: rank 1 gave no sign of life for 20 s" in out0, out0[-4000:]
    final = wait_record(tmp_path / "n0", "frozen", lambda r: r["status"] == "finished", 5)
    assert final["termination"] == "failed-training", final
    assert final["last_push"]["final"] and final["last_push"]["epoch"] >= record["epoch"]
    assert "weights/last.pt" in hub_server.files("tester/frozen")
