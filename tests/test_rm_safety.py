"""`runspec rm` never hides a run's unverified weights from the machine's verdict (issue 19.1):
it refuses, and `--force` leaves a tombstone that still keeps the machine from being destroyed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from runspec.machine.endgame import Endgame
from runspec.machine.host import FinishHost
from runspec.machine.verdict import machine_verdict
from runspec.providers.vast import Vast
from runspec.run.accept import accept
from runspec.spec.loader import load_spec
from runspec.spec.model import FinishAction, FinishSpec, Unverified
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore, Termination
from tests.fixtures_providers import StandIn, VastInstance
from tests.fixtures_run import SpecWriter
from tests.test_machine_safety import ended, push_final, trained


def rm(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runspec", "rm", *args, "--state", str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_rm_refuses_a_run_whose_weights_are_only_here_and_force_leaves_a_tombstone(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    layout = StateLayout(state)
    accept(load_spec(write_spec("alone")), state)  # pushes nowhere
    ended(RecordStore(state), "alone", Termination.COMPLETED)
    run_dir = layout.run_paths("alone").run_dir
    trained(layout.run_paths("alone"), 3)

    refused = rm(state, "alone")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "is not retired" in refused.stderr and "only on this disk" in refused.stderr
    assert (layout.job_dir("alone") / "record.json").exists()

    forced = rm(state, "alone", "--force", "--format", "json")
    assert forced.returncode == 0, forced.stderr
    said = json.loads(forced.stdout)
    assert not layout.job_dir("alone").exists() and said["tombstone"]
    # The run folder is kept out of the name's way, and the tombstone names it where it lies.
    assert not run_dir.exists()
    run_dir = Path(said["kept"][0])
    assert run_dir.name.startswith("alone.removed-")
    assert (run_dir / "weights" / "last.pt").exists()
    verdict = machine_verdict(layout)
    assert verdict.verdict == "unsafe"
    assert "retired with --force" in verdict.why and str(run_dir) in verdict.why

    # Another run's destroy: the machine is stopped (its disk kept), never destroyed.
    VastInstance(standin)
    env = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "k"}
    host = FinishHost(provider=Vast(env, confirm_timeout=2.0, poll_interval=0.1))
    endgame = Endgame(layout, host=host, say=lambda line: None)
    destroy = FinishSpec(action=FinishAction.DESTROY, provider="vast", unverified=Unverified.STOP)
    endgame.arm("other", destroy, hourly_cost=None, weights="", why="test")
    outcome = endgame.enter()
    assert outcome.result is not None and outcome.result.action == "stop", outcome
    assert standin.made("DELETE") == [] and len(standin.made("PUT")) == 1
    assert (run_dir / "weights" / "last.pt").exists()

    # Once the files left behind are gone, the tombstone holds nothing back.
    for path in (run_dir / "weights").iterdir():
        path.unlink()
    assert machine_verdict(layout).safe


def test_rm_of_a_verified_run_needs_no_force(tmp_path: Path, write_spec: SpecWriter) -> None:
    state = tmp_path / "state"
    layout = StateLayout(state)
    accept(load_spec(write_spec("pushed", push={"dir": str(tmp_path / "volume")})), state)
    trained(layout.run_paths("pushed"), 2)
    push_final(state, "pushed")
    ended(RecordStore(state), "pushed", Termination.COMPLETED)
    out = rm(state, "pushed")
    assert out.returncode == 0, out.stderr
    assert not layout.retired.exists()
    assert machine_verdict(layout).safe


def test_rm_says_what_happens_to_the_hub_repo_and_to_a_new_run_of_the_name(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    state = tmp_path / "state"
    accept(load_spec(write_spec("gone", push={"hub": {"repo": "me/gone"}})), state)
    ended(RecordStore(state), "gone", Termination.COMPLETED)
    out = rm(state, "gone")
    assert out.returncode == 0, out.stderr
    assert "its pushes stay in hub me/gone" in out.stdout
    # What a new run of the name then meets (tests/test_push_hub.py shows it refused).
    assert "a new run named gone does not push there" in out.stdout
    assert "push.hub.reuse: true" in out.stdout
