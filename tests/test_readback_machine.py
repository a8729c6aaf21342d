"""Read-back is machine-wide (issue 19.4): run A asks for a destroy, run B (finish none) never
had its push read back; the destroy reads B's weights back first, and falls back to A's
unverified choice (a stop, the disk kept) when the target serves other bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runspec.machine.endgame import Endgame
from runspec.machine.host import FinishHost
from runspec.providers.vast import Vast
from runspec.run.accept import accept
from runspec.spec.loader import load_spec
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore, Termination
from tests.fixtures_providers import StandIn, VastInstance
from tests.fixtures_run import SpecWriter
from tests.test_machine_safety import ended, push_final, trained


@pytest.mark.parametrize("target_lost_bytes", [True, False], ids=["other-bytes", "intact"])
def test_a_destroy_reads_back_every_runs_weights_first(
    tmp_path: Path,
    write_spec: SpecWriter,
    standin: StandIn,
    provider_env: dict[str, str],
    target_lost_bytes: bool,
) -> None:
    state = tmp_path / "state"
    layout = StateLayout(state)
    volume = tmp_path / "volume"
    destroy = {"action": "destroy", "provider": "vast", "unverified": "stop"}
    accept(load_spec(write_spec("a", finish=destroy, push={"dir": str(volume / "a")})), state)
    accept(load_spec(write_spec("b", finish={"action": "none"}, push={"dir": str(volume / "b")})),
           state)  # fmt: skip
    for name in ("a", "b"):
        trained(layout.run_paths(name), 2)
        push_final(state, name)
        ended(RecordStore(state), name, Termination.COMPLETED)
    b_manifest = json.loads(layout.run_paths("b").pushed_manifest.read_text())
    assert b_manifest.get("read_back") is not True  # its own finish asked for no read-back
    if target_lost_bytes:
        for copy in volume.joinpath("b").rglob("last.pt"):
            copy.write_bytes(b"other bytes" * 100)

    VastInstance(standin)
    env = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "k"}
    host = FinishHost(provider=Vast(env, confirm_timeout=3.0, poll_interval=0.1), retry_base=0.2)
    said: list[str] = []
    game = Endgame(layout, host=host, say=said.append)
    spec_a = load_spec(layout.run_paths("a").spec_file)
    game.arm("a", spec_a.finish, hourly_cost=None, weights="", why="test")
    outcome = game.enter()
    assert outcome.result is not None and outcome.result.ok, said
    if target_lost_bytes:
        assert outcome.result.action == "stop" and standin.made("DELETE") == []
        assert any("the machine is not destroyed: run b's weights do not read back" in line
                   for line in said)  # fmt: skip
    else:
        assert outcome.result.action == "destroy" and len(standin.made("DELETE")) == 1
        b_manifest = json.loads(layout.run_paths("b").pushed_manifest.read_text())
        assert b_manifest["read_back"] is True
