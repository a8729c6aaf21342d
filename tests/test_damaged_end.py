"""A damaged record blocks the destroy, not the stop (issue 19.5): the machine's end still
stops it (the disk and every run's weights kept), and the failsafe acts on a damaged run's job
folder instead of saying "nothing to do"."""

from __future__ import annotations

import json
from pathlib import Path

from runspec.machine import failsafe
from runspec.machine.endgame import Endgame
from runspec.machine.host import FinishHost
from runspec.providers.vast import Vast
from runspec.run.accept import accept
from runspec.spec.loader import load_spec
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore, Termination
from tests.fixtures_providers import StandIn, VastInstance
from tests.fixtures_run import SpecWriter
from tests.test_machine_safety import ended, pushed, trained

EIGHT_BYTES = b"\x8f\x01\xff\xfe\x00\x13\x88\x9a"
DESTROY = {"action": "destroy", "provider": "vast", "unverified": "stop"}


def host(standin: StandIn, provider_env: dict[str, str]) -> FinishHost:
    VastInstance(standin)
    env = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "k"}
    vast = Vast(env, confirm_timeout=3.0, poll_interval=0.1)
    return FinishHost(provider=vast, end_window=60.0, retry_base=0.2)


def broken(tmp_path: Path, write_spec: SpecWriter, finish: dict[str, str]) -> StateLayout:
    """Run `broken`, trained and at its final push, its record then damaged."""
    state = tmp_path / "state"
    layout = StateLayout(state)
    accept(load_spec(write_spec("broken", finish=finish, push=push(tmp_path))), state)
    trained(layout.run_paths("broken"), 2)
    pushed(RecordStore(state), "broken", Termination.COMPLETED)
    layout.run_paths("broken").record_file.write_bytes(EIGHT_BYTES)
    return layout


def push(tmp_path: Path) -> dict[str, str]:
    return {"dir": str(tmp_path / "volume")}


def test_a_damaged_record_turns_a_destroy_into_a_stop(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    layout = broken(tmp_path, write_spec, {"action": "none"})
    accept(load_spec(write_spec("fine", finish=DESTROY, push=push(tmp_path))), layout.state)
    ended(RecordStore(layout.state), "fine", Termination.COMPLETED)

    said: list[str] = []
    game = Endgame(layout, host=host(standin, provider_env), say=said.append)
    game.arm("fine", load_spec(layout.run_paths("fine").spec_file).finish, hourly_cost=None,
             weights="", why="test")  # fmt: skip
    outcome = game.enter()
    assert outcome.result is not None and outcome.result.ok, said
    assert outcome.result.action == "stop"
    assert standin.made("DELETE") == [] and len(standin.made("PUT")) == 1
    assert (layout.run_paths("broken").run_dir / "weights" / "last.pt").exists()


def test_the_failsafe_acts_on_a_damaged_runs_job_folder(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    layout = broken(tmp_path, write_spec, DESTROY)
    said: list[str] = []
    code = failsafe.fire(
        layout.state, "broken", host=host(standin, provider_env), progress=said.append
    )
    assert code == 0, said
    assert any("acting on its job folder" in line for line in said)
    assert standin.made("DELETE") == [] and len(standin.made("PUT")) == 1
    fired = json.loads(layout.run_paths("broken").failsafe_file.read_text())["fired"]
    assert fired["applied"] and fired["result"]["action"] == "stop"
