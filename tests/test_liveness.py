"""Liveness a flaky Hub cannot fake away, without training: leases seeded as a box writes them,
the real huggingface_hub client against the local Hub (made to fail), `runspec watch --once`
as a real process with its clock skewed through its clock seam (RUNSPEC_CLOCK_OFFSET_S)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from runspec.clock import ManualClock, utc_iso
from runspec.machineowner import engine_owned
from runspec.spec.loader import load_spec_text
from runspec.store.paths import RunPaths
from runspec.store.state import RecordStore, RunRecord, RunStatus
from runspec.watch.act import WatchOptions, watch_repo
from runspec.watch.lease import HubLease
from runspec.watch.leasefields import LeaseError
from runspec.watch.liveness import Memory, read_live
from runspec.watch.renew import LeaseRenewer
from runspec.watch.seal import KEY_VARIABLE
from tests.fixtures_providers import StandIn, VastInstance
from tests.fixtures_watch import (
    REPO,
    WATCH_KEY,
    lease_at_hub,
    lease_doc,
    result,
    sealed,
    watch,
    watcher_env,
)
from tests.hubserver import HubServer

SPEC = """runspec: 1
name: early
dataset: {synthetic: {train: 4, val: 2}}
train: {model: yolo9-t, epochs: 1}
budget: {wall_clock: 1h}
push: {hub: {repo: me/early}}
watch: {lease: 1m}
"""


@pytest.fixture
def env(hub_env: dict[str, str], standin: StandIn, tmp_path: Path) -> dict[str, str]:
    return watcher_env(hub_env, standin, tmp_path / "watcher-home")


def renewer(tmp_path: Path, status: RunStatus = RunStatus.PREFLIGHT) -> LeaseRenewer:
    spec = load_spec_text(SPEC, "early.yaml")
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    paths.job_dir.mkdir(parents=True)
    store = RecordStore(tmp_path / "state")
    store.save(RunRecord("early", "0" * 64, status=status))
    return LeaseRenewer(
        spec, paths, store, say=lambda line: None, owner=engine_owned("SkyPilot", eager_push=False)
    )


def box_commit(hub: HubServer, ago: float, **over: object) -> None:
    """A renewal as the box commits it (its title), made `ago` seconds ago on the Hub's clock."""
    body = json.dumps(sealed(lease_doc(**over))).encode()  # sealed, as a box with the key does
    title = "runspec: lease of hung (training)"
    sha = hub.put_file(REPO, "runspec/lease.json", body, repo_type="model", message=title)
    hub.repo(REPO).times[sha] = time.time() - ago


@pytest.mark.parametrize("offset", ["1000", "-1000"])
def test_a_watcher_whose_clock_is_off_refuses_to_act(
    hub_server: HubServer, standin: StandIn, env: dict[str, str], offset: str
) -> None:
    box = VastInstance(standin)
    # A healthy box (it renewed just now); a watcher two leases and more ahead of the Hub
    # would see it expired, one behind would trust it for ever: both refuse, and say why.
    box_commit(hub_server, 5.0, vouched_until=utc_iso(time.time() + 600))
    code, out, _err = result(watch({**env, "RUNSPEC_CLOCK_OFFSET_S": offset}, REPO))
    assert code == 1
    said = out["runs"][0]["error"]
    assert "clock is 16m" in said and "the Hub's" in said and "ends nothing" in said
    assert ("ahead of" if offset[0] != "-" else "behind") in said
    assert standin.made() == [] and box.effects == []
    assert not lease_at_hub(hub_server).get("ended_by")


def test_the_box_s_newest_commit_on_the_hub_s_clock_is_what_it_vouched_from(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    box = VastInstance(standin)
    # The box's clock runs two leases behind: the lease it just committed reads as expired
    # long ago, yet the Hub took the commit 5 s ago.
    behind = time.time() - 700
    box_commit(hub_server, 5.0, vouched_until=utc_iso(behind + 600), renewed_at=utc_iso(behind))
    code, out, err = result(watch(env, REPO))
    assert code == 0, err
    assert out["runs"][0]["verdict"] == "alive"
    assert standin.made() == [] and box.effects == []
    # The same lease committed 1000 s ago on the Hub's clock: expired, and stopped.
    box_commit(hub_server, 1000.0, vouched_until=utc_iso(time.time() + 600))
    code, out, err = result(watch(env, REPO))
    assert code == 0, err
    assert out["runs"][0]["verdict"] == "end" and box.effects == ["PUT"]


def test_time_spent_failing_to_read_is_added_to_the_grace(
    hub_server: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, WATCH_KEY)  # this watcher holds the boxes' watch key
    # Committed 1000 s ago, vouched for 600 s: 100 s past the default grace of 300 s.
    box_commit(hub_server, 1000.0)
    opts = WatchOptions(dry_run=True)
    fresh = watch_repo(REPO, opts, env={}, hub=HubLease(REPO))
    assert fresh.verdict == "would-end"
    clock = ManualClock(start=time.time())
    memory = Memory()
    hub_server.down()
    with pytest.raises(Exception, match="cannot read"):
        read_live(REPO, HubLease(REPO), clock, memory, patience=150.0)
    hub_server.up()
    reading = read_live(REPO, HubLease(REPO), clock, memory)
    # The watcher failed for as long as its patience (its pauses, on its own clock).
    assert 120.0 <= reading.failing_s <= 150.0
    # Owed until the box commits again: a second clean read still adds it.
    assert read_live(REPO, HubLease(REPO), clock, memory).failing_s == reading.failing_s
    box_commit(hub_server, 1.0)
    assert read_live(REPO, HubLease(REPO), clock, memory).failing_s == 0.0


def test_an_outage_counts_from_the_start_of_the_first_read_that_failed() -> None:
    # A read against a dropped connection takes its time to fail (the client's own tries):
    # the outage the watcher owes the box began when that read began, not when it gave up.
    clock = ManualClock(start=1_800_000_000.0)

    class SlowToFail:
        def read(self) -> tuple[str | None, None]:
            clock.sleep(25.0)
            raise LeaseError("cannot read the lease: connection dropped")

    memory = Memory()
    with pytest.raises(LeaseError):
        read_live(REPO, SlowToFail(), clock, memory, patience=40.0)  # type: ignore[arg-type]
    assert memory.failing_since[REPO] == 1_800_000_000.0


def test_two_watchers_sharing_a_memory_file_each_keep_what_they_learned(tmp_path: Path) -> None:
    # Two `runspec watch` processes on one machine, one state folder: each keeps its memory
    # in the same watch-memory.json. Each saves in turn; neither forgets the other's outage.
    path = tmp_path / "watch-memory.json"
    one, two = Memory(), Memory()
    one.keep_in(path)
    two.keep_in(path)
    one.failed("me/a", 1000.0)
    two.failed("me/b", 2000.0)
    assert one.cleared("me/a", 1100.0, "c" * 40) == 100.0  # owed to me/a's box from now on
    two.failed("me/c", 3000.0)
    later = Memory()  # the next --once pass, a new process
    later.keep_in(path)
    assert later.failing_since == {"me/b": 2000.0, "me/c": 3000.0}
    assert later.owed == {"me/a": (100.0, "c" * 40)}
    # A repo one watcher cleared is cleared for all: the other's save does not bring it back.
    assert two.cleared("me/b", 2050.0, None) == 50.0
    one.failed("me/d", 4000.0)
    again = Memory()
    again.keep_in(path)
    assert again.failing_since == {"me/c": 3000.0, "me/d": 4000.0}
    assert again.owed == {"me/a": (100.0, "c" * 40), "me/b": (50.0, None)}


def test_a_renewal_is_tried_again_through_500s_and_429s(
    hub_server: HubServer, tmp_path: Path
) -> None:
    hub_server.put_file("me/early", "README.md", b"# early\n", repo_type="model")
    box = renewer(tmp_path, RunStatus.TRAINING)
    hub_server.fail("repo_info", "500", times=2)  # tried once, the renewal was lost
    assert box.renew() is True
    hub_server.flaky(0.5, "429", retry_after=1, seed=1)  # its first request fails
    assert box.renew() is True
    hub_server.clear_faults()
    assert hub_server.count("repo_info", 500) == 2
    assert any(request.status == 429 for request in hub_server.log)
    assert box.renewals == 2
    assert json.loads(hub_server.read_file("me/early", "runspec/lease.json"))["state"] == "training"


def test_the_first_lease_makes_the_private_repo_before_any_push(
    hub_server: HubServer, tmp_path: Path
) -> None:
    from huggingface_hub import HfApi

    box = renewer(tmp_path)  # preflight: nothing pushed, no repo yet
    assert ("model", "me/early") not in hub_server.repos
    assert box.renew() is True
    repo = hub_server.repo("me/early")
    assert repo.private is True
    lease = json.loads(hub_server.read_file("me/early", "runspec/lease.json", repo_type="model"))
    assert lease["state"] == "preflight" and lease["run"] == "early"
    # An org's watcher finds it by its tag before the first push's card replaces the stub.
    assert [m.id for m in HfApi().list_models(author="me", filter="runspec")] == ["me/early"]


def test_a_once_watcher_remembers_an_outage_across_its_passes(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    box = VastInstance(standin)
    # Committed 845 s ago, vouched for 600 s: alive for 55 s more with the default grace, less
    # than the minute the first pass spends failing (the second pass reads it past that
    # minute), and far more than a loaded machine's start of a watcher.
    box_commit(hub_server, 845.0)
    hub_server.down()  # the Hub is down for this pass, a minute of tries
    code, out, _err = result(watch(env, REPO))
    assert code == 1 and out["runs"][0]["verdict"] == "error"
    hub_server.up()
    # However long that pass took on this machine, the box's commit is now expired 15 s past
    # the default grace: only the minute this watcher spent failing keeps it alive.
    repo = hub_server.repo(REPO)
    repo.times[repo.commits[-1][0]] = time.time() - (600 + 300 + 15)
    # The next pass (a new process, as a scheduled job runs it) reads the Hub again past the
    # 30 s; the box met the same outage, so the minute this watcher failed is its grace too.
    code, out, err = result(watch(env, REPO))
    assert code == 0, err
    seen = out["runs"][0]
    assert seen["verdict"] == "alive" and seen["grace_added"] >= 50.0, json.dumps(seen)
    assert standin.made() == [] and box.effects == []
