"""The dead-man's switch through real processes: a real `runspec run` renews its lease on the
local Hub; every process of it is frozen (SIGSTOP: the box hangs); `runspec watch --once`, with
its own HOME and only the Hub's variables and the provider's key, ends the box through the
provider stand-in after the lease plus the grace, and the box, thawed, does not fight it."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from runspec.clock import parse_utc_iso
from runspec.watch.seal import KEY_VARIABLE
from tests.fixtures_cpu import CpuCap
from tests.fixtures_daemon import end_leftovers
from tests.fixtures_providers import StandIn, VastInstance
from tests.fixtures_run import SpecWriter, start_run
from tests.fixtures_watch import WATCH_KEY, box_pids, result, signal_all, watch, watcher_env
from tests.hubserver import HubServer

pytestmark = pytest.mark.training

LEASE = "runspec/lease.json"


def hub_lease(hub: HubServer, repo: str) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(hub.read_file(repo, LEASE, repo_type="model"))
    except KeyError:
        return None
    return data


def wait_lease(
    hub: HubServer, repo: str, ok: Any, proc: subprocess.Popen[str], timeout: float = 90.0
) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        lease = hub_lease(hub, repo) if ("model", repo) in hub.repos else None
        if lease is not None and ok(lease):
            return lease
        time.sleep(0.5)
    if proc.poll() is None:
        proc.kill()
    pytest.fail(f"{repo}: no such lease within {timeout} s:\n{proc.communicate()[0]}")


def watch_until_ended(env: dict[str, str], repo: str, timeout: float = 120.0) -> list[str]:
    """`runspec watch --once` again and again until it ends the box; the verdicts, in order."""
    verdicts: list[str] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        code, out, err = result(watch(env, repo))
        verdicts.append(out["runs"][0]["verdict"])
        if verdicts[-1] == "end":
            assert code == 0, err
            return verdicts
        assert code == 0 and verdicts[-1] == "alive", (verdicts, err)
        time.sleep(1.0)
    pytest.fail(f"the watcher never ended the box: {verdicts}")


def box_env(hub_env: dict[str, str], provider_env: dict[str, str], marker: str) -> dict[str, str]:
    """The box's own environment: vast names the instance and its key in the container."""
    return {
        **hub_env, **provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "box-own-key",
        "RUNSPEC_TEST_BOX": marker, KEY_VARIABLE: WATCH_KEY,
    }  # fmt: skip


def end_box(proc: subprocess.Popen[str], pids: set[int], state: Path) -> str:
    """Thaw and end everything the box started; its output."""
    signal_all(pids, signal.SIGCONT)
    signal_all(pids, signal.SIGKILL)
    out, _ = proc.communicate(timeout=60)
    end_leftovers(state)
    return out


def test_a_hung_box_is_stopped_after_lease_and_grace_and_never_destroyed(
    hub_server: HubServer,
    hub_env: dict[str, str],
    standin: StandIn,
    provider_env: dict[str, str],
    write_spec: SpecWriter,
    tmp_path: Path,
    cpu_cap: CpuCap,
) -> None:
    box = VastInstance(standin)
    marker = secrets.token_hex(8)
    spec = write_spec(
        "hung",
        epochs=300,
        push={"hub": {"repo": "me/hung"}, "every": "10s"},
        watch={"lease": "10s"},
        train={"save_period": 100},
    )
    state = tmp_path / "state"
    proc = start_run(spec, state, box_env(hub_env, provider_env, marker))
    cpu_cap.hold(proc.pid)
    pids: set[int] = set()
    try:
        renewed = wait_lease(
            hub_server, "me/hung", lambda lease: lease["state"] == "training", proc
        )
        cpu_cap.limit(0.3)  # it trains on until signalled: a slower machine does as well
        assert renewed["provider"] == "vast" and renewed["instance"] == "4242"
        assert "box-own-key" not in json.dumps(renewed)
        pids = box_pids(proc.pid, marker)
        signal_all(pids, signal.SIGSTOP)
        frozen = time.time()
        env = watcher_env(hub_env, standin, tmp_path / "watcher-home")
        verdicts = watch_until_ended(env, "me/hung")
        lease = hub_lease(hub_server, "me/hung")
        assert lease is not None
        ended = lease["ended_by"]
        assert verdicts[0] == "alive"  # it waited: the frozen box still vouched for itself
        assert parse_utc_iso(ended["at"]) >= parse_utc_iso(lease["vouched_until"]) + 10.0
        assert parse_utc_iso(ended["at"]) >= frozen
        assert ended["action"] == "stop" and ended["confirmed"] is True
        assert box.effects == ["PUT"] and not standin.made("DELETE")
        assert standin.made("PUT")[0].header("Authorization") == "Bearer vast-watcher-key"
        # The box comes back: it reads who ended it and does not renew over it.
        signal_all(pids, signal.SIGCONT)
        for _ in range(25):  # two renewals' time and more
            time.sleep(1.0)
            after = hub_lease(hub_server, "me/hung")
            assert after is not None and after["ended_by"]["claim"] == ended["claim"]
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=240)
        assert "was ended by watch" in out and "not renewed over it" in out
        final = hub_lease(hub_server, "me/hung")
        assert final is not None and final["ended_by"]["claim"] == ended["claim"]
    finally:
        if proc.poll() is None:
            end_box(proc, pids | box_pids(proc.pid, marker), state)
        end_leftovers(state)


def test_a_box_that_hangs_after_its_verified_final_push_is_destroyed(
    hub_server: HubServer,
    hub_env: dict[str, str],
    standin: StandIn,
    provider_env: dict[str, str],
    write_spec: SpecWriter,
    tmp_path: Path,
) -> None:
    box = VastInstance(standin)
    marker = secrets.token_hex(8)
    # The finish never ends (a hung command): the box hangs after its final push verified.
    spec = write_spec(
        "done", epochs=2, push={"hub": {"repo": "me/done"}}, watch={"lease": "10s"},
        finish={"action": "command", "command": ["sleep", "600"]},
    )  # fmt: skip
    state = tmp_path / "state"
    proc = start_run(spec, state, box_env(hub_env, provider_env, marker))
    pids: set[int] = set()
    try:
        wait_lease(hub_server, "me/done", lambda lease: lease["final_verified"] is True, proc)
        pids = box_pids(proc.pid, marker)
        signal_all(pids, signal.SIGSTOP)
        env = watcher_env(hub_env, standin, tmp_path / "watcher-home")
        watch_until_ended(env, "me/done")
        lease = hub_lease(hub_server, "me/done")
        assert lease is not None and lease["ended_by"]["action"] == "destroy"
        assert box.effects == ["DELETE"] and not standin.made("PUT")
    finally:
        end_box(proc, pids | box_pids(proc.pid, marker), state)
