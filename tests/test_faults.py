"""A seeded fault test: the daemon killed at random points of every phase of three real runs with
different finishes, and the promises checked after each kill and at the end.

- no destroy while any run's newest complete checkpoint is unverified (judged from the disk at
  the moment the provider sees the DELETE);
- every run reaches a final state (or is resumed by the next daemon);
- the machine's end takes effect once, and a command finish runs at most once;
- never a second trainer for a run (sampled all along, from the process table);
- one daemon (seeded) meets its state folder made read-only for a few seconds (a read-only bind
  mount): it must not die of it, and every promise above still holds.

The seed is printed on failure; `RUNSPEC_FAULT_SEED=N` replays one. The vast.ai stand-in
confirms a stop or a destroy only after a few polls, so kills also land mid-confirmation, and
(seeded too) answers the first requests with a 500 or a 429 with Retry-After before a healthy
one: the end must keep trying until it is confirmed.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from runspec.machine.verdict import run_safety
from runspec.spec.loader import load_spec
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore, RunStatus
from tests.fixtures_daemon import DaemonProc, drop
from tests.fixtures_providers import Answer, StandIn, VastInstance
from tests.fixtures_run import base_spec, merge
from tests.hubserver import HubServer
from tests.test_readonly_state import read_only

pytestmark = pytest.mark.training

SEED = int(os.environ.get("RUNSPEC_FAULT_SEED", "20261130"))
KILLS = 6
CONFIRM_POLLS = 2  # GETs that still read running after the request: a window for a kill
# What the provider answers before a healthy answer (the last repeats: then 200).
PROVIDER_FAULTS: tuple[tuple[Answer, ...], ...] = (
    (),
    (Answer(500, "internal error"),),
    (Answer(429, "slow down", headers={"Retry-After": "2"}), Answer(502, "bad gateway")),
)


def spec_yaml(name: str, epochs: int, **sections: Any) -> str:
    doc = merge(base_spec(name, epochs), sections)
    doc["preflight"] = {"doctor": False, "disk": "600MB"}
    return yaml.safe_dump(doc, sort_keys=False)


class Machine:
    """The vast.ai stand-in's one instance, and what the test saw happen to it."""

    def __init__(self, standin: StandIn, state: Path, faults: tuple[Answer, ...]) -> None:
        self.state = state
        self.violations: list[str] = []
        healthy = (*faults, Answer(200))
        self.instance = VastInstance(standin, confirm_polls=CONFIRM_POLLS, on_delete=self._delete,
                                     deletes=healthy, puts=healthy)  # fmt: skip

    def _delete(self) -> None:
        # The moment a destroy arrives: every run's newest weights must be verified elsewhere.
        layout = StateLayout(self.state)
        for record in RecordStore(self.state).all():
            paths = layout.run_paths(record.name)
            safety = run_safety(paths, load_spec(paths.spec_file), record)
            if record.status is not RunStatus.QUEUED and not safety.safe:
                self.violations.append(f"DELETE while {safety.why}")


class TrainerCensus(threading.Thread):
    """The most trainers ever seen at once for each run (from their command lines)."""

    def __init__(self, state: Path) -> None:
        super().__init__(daemon=True)
        self.jobs = str(state / "jobs")
        self.most: Counter[str] = Counter()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            seen: Counter[str] = Counter()
            for proc in psutil.process_iter(["cmdline"]):
                cmdline = proc.info.get("cmdline") or []
                job = next((a for a in cmdline if a.startswith(self.jobs)), None)
                if "runspec.trainer" in cmdline and job is not None:  # ours, not another test's
                    seen[job] += 1
            for job, count in seen.items():
                self.most[job] = max(self.most[job], count)


@pytest.mark.timeout(900)
def test_random_daemon_kills_keep_every_promise(
    make_daemon: Any,
    hub_server: HubServer,
    standin: StandIn,
    provider_env: dict[str, str],
    tmp_path: Path,
) -> None:
    rng = random.Random(SEED)
    marker = tmp_path / "command-finish"

    def hub(name: str) -> dict[str, Any]:
        return {"hub": {"repo": f"me/{name}"}}

    first: DaemonProc = make_daemon()
    faults = rng.choice(PROVIDER_FAULTS)
    machine = Machine(standin, first.state, faults)
    specs = {
        "a-destroy": spec_yaml(
            "a-destroy", 3, push=hub("a"), finish={"action": "destroy", "provider": "vast"}
        ),
        "b-command": spec_yaml(
            "b-command",
            2,
            push=hub("b"),
            finish={"action": "command", "command": ["sh", "-c", f"echo ran >> {marker}"]},
        ),
        # Without a push its weights stay on this disk: then the end must be a stop.
        "c-local": spec_yaml("c-local", 2, **({"push": hub("c")} if rng.random() < 0.5 else {})),
    }
    for name, text in specs.items():
        drop(first.inbox, f"{name}.yaml", text)
    env = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "vast-key-faults"}
    census = TrainerCensus(first.state)
    census.start()
    kills: list[str] = []
    daemon = first
    try:
        read_only_at = rng.randrange(KILLS)  # one daemon meets a read-only state folder
        for turn in range(KILLS):
            daemon.start(env=env)
            daemon.wait_ready()
            time.sleep(rng.uniform(0.3, 6.0))
            if turn == read_only_at:
                held = rng.uniform(2.0, 10.0)
                with read_only(daemon.state):
                    time.sleep(held)
                    phases = {n: (daemon.record(n) or {}).get("status") for n in specs}
                kills.append(f"read-only for {held:.1f} s with {phases}")
                assert daemon.proc is not None and daemon.proc.poll() is None, (
                    f"the daemon died of a read-only state folder; {kills}\n{daemon.output}"
                )
            how = signal.SIGKILL if rng.random() < 0.7 else signal.SIGTERM
            phases = {n: (daemon.record(n) or {}).get("status") for n in specs}
            kills.append(f"{how.name} with {phases}")
            daemon.signal(how)
            daemon.wait(timeout=120)
            daemon = make_daemon()
        daemon.start("--once", env=env)
        assert daemon.wait(timeout=600) == 0, daemon.output
    finally:
        census.done.set()
        census.join(timeout=5)
    said = f"seed {SEED}; provider faults {[a.status for a in faults]}; kills: {kills}"
    for name in specs:
        record = daemon.record(name) or {}
        assert record.get("status") == "finished", f"{name} stuck at {record.get('status')}; {said}"
    assert machine.violations == [], said
    ends = machine.instance.effects  # the requests the provider accepted
    assert len(ends) == 1, f"the machine's end took effect as {ends}; {said}"
    asked = [r.method for r in standin.made() if r.method in ("PUT", "DELETE")]
    assert len(asked) == 1 + len(faults), f"requested {asked} for {len(faults)} faults; {said}"
    if "push" not in yaml.safe_load(specs["c-local"]):
        assert ends == ["PUT"], f"unverified weights, yet {ends}; {said}"
    runs = marker.read_text().splitlines() if marker.exists() else []
    assert len(runs) <= 1, f"the command finish ran {len(runs)} times; {said}"
    assert max(census.most.values(), default=0) <= 1, f"two trainers: {census.most}; {said}"
