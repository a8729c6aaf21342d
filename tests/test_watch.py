"""`runspec watch --once` as a real process, against the local Hub and the provider stand-in.

Each watcher runs with its own HOME and only the Hub's variables and the provider's key (plus
the stand-in's address): nothing of the box's own environment. Leases are seeded into the Hub
as a box would have written them, with times relative to now.
"""

from __future__ import annotations

import hashlib
import json
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from runspec.clock import utc_iso
from runspec.spec.model import Spec
from runspec.watch.seal import KEY_VARIABLE
from tests.fixtures_providers import Answer, StandIn, VastInstance, vast_answers_stopped
from tests.fixtures_watch import (
    REPO,
    WATCH_KEY,
    expired,
    lease_at_hub,
    lease_doc,
    result,
    seed,
    watch,
    watcher_env,
)  # fmt: skip
from tests.hubserver import HubServer


@pytest.fixture
def env(hub_env: dict[str, str], standin: StandIn, tmp_path: Path) -> dict[str, str]:
    return watcher_env(hub_env, standin, tmp_path / "watcher-home")


def test_an_expired_lease_stops_the_box_and_records_it(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    box = VastInstance(standin)
    seed(hub_server, expired())
    code, out, err = result(watch(env, REPO))
    assert code == 0, err
    assert box.effects == ["PUT"]  # stopped, never destroyed: its newest weights are unverified
    put = standin.made("PUT")[0]
    assert put.json() == {"state": "stopped"}
    assert put.header("Authorization") == "Bearer vast-watcher-key"
    ended = lease_at_hub(hub_server)["ended_by"]
    assert ended["by"] == "watch" and ended["action"] == "stop" and ended["confirmed"] is True
    assert "lease expired at" in ended["reason"]
    assert out["runs"][0]["confirmed"] is True
    # The confirmation, beside where the run's receipt goes: who saw which end of what.
    end = json.loads(hub_server.read_file(REPO, "runspec/end.json", repo_type="model"))
    assert end["confirmed"] is True and end["by"] == "watch" and end["action"] == "stop"
    assert (end["run"], end["provider"], end["instance"]) == ("hung", "vast", "4242")


def test_a_healthy_lease_is_left_alone(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    box = VastInstance(standin)
    seed(hub_server, lease_doc())
    code, out, _ = result(watch(env, REPO))
    assert code == 0
    assert out["runs"][0]["verdict"] == "alive"
    assert standin.made() == [] and box.effects == []
    assert "ended_by" not in lease_at_hub(hub_server) or not lease_at_hub(hub_server)["ended_by"]


def test_within_the_grace_nothing_is_ended(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    VastInstance(standin)
    seed(hub_server, lease_doc(vouched_until=utc_iso(time.time() - 100)))  # < one lease ago
    code, out, _ = result(watch(env, REPO))
    assert code == 0 and out["runs"][0]["verdict"] == "alive"
    assert standin.made() == []


def _final_weights(hub_server: HubServer, pushed: bytes, listed: bytes) -> dict[str, Any]:
    """`pushed` as the run's last.pt in its repo; the lease's final_weights name `listed`."""
    hub_server.put_file(REPO, "weights/last.pt", pushed, repo_type="model")
    entry = {"size": len(listed), "sha256": hashlib.sha256(listed).hexdigest()}
    return {"weights/last.pt": entry}


def test_a_verified_final_push_lets_the_watcher_destroy(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    box = VastInstance(standin)
    weights = _final_weights(hub_server, b"the final weights", b"the final weights")
    seed(hub_server, expired(final_verified=True, state="finishing", final_weights=weights))
    code, _, err = result(watch(env, REPO))
    assert code == 0, err
    assert box.effects == ["DELETE"]
    assert lease_at_hub(hub_server)["ended_by"]["action"] == "destroy"


@pytest.mark.parametrize("listed", [b"other weights", None])
def test_a_lease_alone_never_turns_a_stop_into_a_destroy(
    hub_server: HubServer, standin: StandIn, env: dict[str, str], listed: bytes | None
) -> None:
    # The lease says the final push verified, but the watcher's own read of the weights at the
    # push target does not match what it lists (or it lists none): a stop, the disk kept.
    box = VastInstance(standin)
    weights = _final_weights(hub_server, b"the final weights", listed) if listed else None
    seed(hub_server, expired(final_verified=True, state="finishing", final_weights=weights))
    code, _, err = result(watch(env, REPO))
    assert code == 0, err
    assert box.effects == ["PUT"]
    ended = lease_at_hub(hub_server)["ended_by"]
    assert ended["action"] == "stop"
    assert "the lease says the final push verified, but" in ended["reason"]


def test_a_passed_deadline_without_a_final_state_ends_the_box(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    box = VastInstance(standin)
    # Still renewing (a trainer that spins past its budget), but the deadline and overrun passed.
    seed(hub_server, lease_doc(deadline=utc_iso(time.time() - 5)))
    code, _, _ = result(watch(env, REPO))
    assert code == 0 and box.effects == ["PUT"]
    assert "deadline plus overrun passed" in lease_at_hub(hub_server)["ended_by"]["reason"]


def test_a_finished_run_is_left_alone(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    VastInstance(standin)
    seed(hub_server, expired(state="finished", final_verified=True))
    code, out, _ = result(watch(env, REPO))
    assert code == 0 and out["runs"][0]["verdict"] == "final"
    assert standin.made() == []  # no receipt naming an end: not even a read of the instance


@pytest.mark.parametrize("asked", ["stop", "auto"])
def test_a_finished_box_s_own_stop_is_confirmed_by_the_watcher_once(
    hub_server: HubServer, standin: StandIn, env: dict[str, str], asked: str
) -> None:
    """The box stopped itself and did not live to push the confirmation: the watcher reads
    the instance stopped, adds it beside the receipt, and never asks again."""
    vast_answers_stopped(standin)
    seed(hub_server, expired(state="finished", final_verified=True))
    finish = {"action": asked, "provider": "vast", "instance": "4242"}
    receipt = json.dumps({"run": "hung", "finish": finish}).encode()
    hub_server.put_file(REPO, "runspec/receipt.json", receipt, repo_type="model")
    code, out, err = result(watch(env, REPO))
    assert code == 0 and out["runs"][0]["verdict"] == "final", err
    assert standin.made("PUT") == [] and standin.made("DELETE") == []  # a read, nothing more
    end = json.loads(hub_server.read_file(REPO, "runspec/end.json", repo_type="model"))
    assert end["by"] == "watch" and end["action"] == asked and end["confirmed"] is True
    assert (
        end["instance"] == "4242" and f"seen stopped after the box's own {asked}" in end["detail"]
    )
    reads = len(standin.made("GET"))
    code, _, err = result(watch(env, REPO))
    assert code == 0 and len(standin.made("GET")) == reads, err  # confirmed: never read again


def test_an_unreadable_hub_calls_nothing_and_exits_non_zero(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    VastInstance(standin)
    seed(hub_server, expired())
    hub_server.down()
    code, out, _ = result(watch(env, REPO))
    assert code == 1
    assert out["ok"] is False and out["runs"][0]["error"]
    assert standin.made() == []


@pytest.mark.parametrize(
    "damage",
    [b"{not json", json.dumps({"schema": 1, "run": "hung"}).encode(), json.dumps([1]).encode()],
)
def test_a_damaged_lease_calls_nothing_and_exits_non_zero(
    hub_server: HubServer, standin: StandIn, env: dict[str, str], damage: bytes
) -> None:
    VastInstance(standin)
    seed(hub_server, damage)
    code, out, _ = result(watch(env, REPO))
    assert code == 1 and "damaged lease" in out["runs"][0]["error"], (out, _)
    assert standin.made() == []


def test_a_provider_that_does_not_answer_is_not_called(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    # No route: every request to the provider is a 404 "no route"; the state read fails first.
    seed(hub_server, expired())
    env = {**env, "RUNSPEC_VAST_API": "http://127.0.0.1:9"}  # nothing listens there
    code, out, _ = result(watch(env, REPO))
    assert code == 1 and "did not answer" in out["runs"][0]["error"]
    assert "ended_by" not in lease_at_hub(hub_server) or not lease_at_hub(hub_server)["ended_by"]


def test_two_watchers_at_once_make_one_provider_call(
    hub_server: HubServer, standin: StandIn, env: dict[str, str], tmp_path: Path
) -> None:
    box = VastInstance(standin)
    seed(hub_server, expired())
    other = {**env, "HOME": str(tmp_path / "other-home")}
    Path(other["HOME"]).mkdir()
    procs = [watch(env, REPO), watch(other, REPO)]
    results = [result(p) for p in procs]
    assert all(code == 0 for code, _, _ in results), [r[2] for r in results]
    assert len(standin.made("PUT")) == 1 and box.effects == ["PUT"]
    verdicts = sorted(out["runs"][0]["verdict"] for _, out, _ in results)
    assert verdicts == ["end", "ended"]


def test_lambda_cannot_stop_so_unverified_weights_are_only_notified(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    seed(hub_server, expired(provider="lambda", instance="lam-1"))
    env = {**env, "LAMBDA_API_KEY": "lam-key", "RUNSPEC_LAMBDA_API": f"{standin.url}/api/v1"}
    code, out, _ = result(watch(env, REPO))
    assert code == 1 and out["runs"][0]["verdict"] == "notify"
    assert standin.made() == []


def test_destroy_unverified_after_lets_a_lambda_box_go(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    seed(hub_server, expired(provider="lambda", instance="lam-1"))
    env = {**env, "LAMBDA_API_KEY": "lam-key", "RUNSPEC_LAMBDA_API": f"{standin.url}/api/v1"}
    standin.on("GET", "/api/v1/instances/lam-1", Answer(200, {"data": {"status": "active"}}))
    standin.on("POST", "/api/v1/instance-operations/terminate")
    terminated = Answer(200, {"data": {"status": "terminated"}})
    standin.answer_with(
        "GET", "/api/v1/instances/lam-1",
        lambda: terminated if standin.made("POST") else Answer(200, {"data": {"status": "active"}}),
    )  # fmt: skip
    code, _, err = result(watch(env, REPO, "--destroy-unverified-after", "1m"))
    assert code == 0, err
    assert [r.json() for r in standin.made("POST")] == [{"instance_ids": ["lam-1"]}]
    assert lease_at_hub(hub_server)["ended_by"]["action"] == "destroy"


def test_dry_run_says_and_calls_nothing(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    VastInstance(standin)
    seed(hub_server, expired())
    code, out, _ = result(watch(env, REPO, "--dry-run"))
    assert code == 0 and out["runs"][0]["verdict"] == "would-end"
    assert out["runs"][0]["action"] == "stop"
    assert standin.made() == []


def test_the_stand_in_hub_refuses_a_commit_on_a_moved_branch(hub_server: HubServer) -> None:
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    seed(hub_server, lease_doc())
    api = HfApi(endpoint=hub_server.url)
    old = api.repo_info(REPO).sha
    seed(hub_server, lease_doc(epoch=4))
    op = CommitOperationAdd(path_in_repo="x.txt", path_or_fileobj=b"x")
    with pytest.raises(HfHubHTTPError) as caught:
        api.create_commit(REPO, operations=[op], commit_message="m", parent_commit=old)
    assert caught.value.response.status_code == 412
    api.create_commit(
        REPO, operations=[op], commit_message="m", parent_commit=api.repo_info(REPO).sha
    )


def test_install_hf_jobs_schedules_the_watcher_with_the_keys_as_secrets(
    hub_server: HubServer, env: dict[str, str]
) -> None:
    from tests.hubscheduled import scheduled_jobs

    ref = "runspec @ git+https://example.invalid/runspec@v0.0.test"
    env = {**env, "RUNPOD_API_KEY": "rp-key", "RUNSPEC_INSTALL": ref}
    proc = subprocess.run(
        [sys.executable, "-m", "runspec", "watch", "--install", "hf-jobs", "myorg", "--json",
         "--notify", "ntfy://watch-topic"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [job] = scheduled_jobs(hub_server)
    assert job["namespace"] == "myorg"
    assert job["schedule"] == "*/10 * * * *"
    spec = job["jobSpec"]
    assert spec["flavor"] == "cpu-basic"
    # The keys and the notification URL (a webhook URL is a credential) as secrets only.
    assert spec["secrets"] == {
        "HF_TOKEN": env["HF_TOKEN"], "VAST_API_KEY": "vast-watcher-key", "RUNPOD_API_KEY": "rp-key",
        "RUNSPEC_WATCH_NOTIFY": "ntfy://watch-topic", KEY_VARIABLE: WATCH_KEY,
    }  # fmt: skip
    assert "vast-watcher-key" not in json.dumps(spec.get("environment") or {})
    assert WATCH_KEY not in json.dumps(command := spec["command"])
    assert command[-4:] == ["runspec", "watch", "--once", "myorg"]
    assert "ntfy://watch-topic" not in json.dumps(command)
    assert ref in command  # runspec from the direct reference, never `runspec` from PyPI
    said = json.loads(proc.stdout)
    assert said["flavor"] == "cpu-basic" and 0 < said["usd_per_day"] < 0.1


def test_install_hf_jobs_refuses_without_the_watch_key(
    hub_server: HubServer, env: dict[str, str]
) -> None:
    from tests.hubscheduled import scheduled_jobs

    ref = "runspec @ git+https://example.invalid/runspec@v0.0.test"
    run_env = {k: v for k, v in env.items() if k != KEY_VARIABLE}
    proc = subprocess.run(
        [sys.executable, "-m", "runspec", "watch", "--install", "hf-jobs", "myorg"],
        env={**run_env, "RUNSPEC_INSTALL": ref},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "RUNSPEC_WATCH_KEY is not set" in proc.stderr, proc.stderr
    assert scheduled_jobs(hub_server) == []


def test_install_hf_jobs_refuses_to_install_runspec_by_its_pypi_name(
    hub_server: HubServer, env: dict[str, str]
) -> None:
    """`runspec` on PyPI is another project's: the job would run it beside every key."""
    from tests.hubscheduled import scheduled_jobs

    for ref in (None, "runspec==0.1.0"):
        run_env = {k: v for k, v in env.items() if k != "RUNSPEC_INSTALL"}
        if ref is not None:
            run_env["RUNSPEC_INSTALL"] = ref
        proc = subprocess.run(
            [sys.executable, "-m", "runspec", "watch", "--install", "hf-jobs", "myorg"],
            env=run_env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert "direct reference" in proc.stderr, proc.stderr
    assert scheduled_jobs(hub_server) == []


def test_org_mode_watches_the_org_s_runspec_repos(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    box = VastInstance(standin)
    card = b"---\ntags:\n- runspec\n---\n# a run\n"
    for repo in ("me/hung", "me/fine"):
        hub_server.put_file(repo, "README.md", card, repo_type="model")
    seed(hub_server, expired())
    seed(hub_server, lease_doc(run="fine", instance="4343"), repo="me/fine")
    hub_server.put_file("me/untagged", "README.md", b"# not a run\n", repo_type="model")
    seed(hub_server, expired(), repo="me/untagged")
    code, out, err = result(watch(env, "me"))
    assert code == 0, err
    assert {r["repo"]: r["verdict"] for r in out["runs"]} == {"me/hung": "end", "me/fine": "alive"}
    assert box.effects == ["PUT"]
    # An org with no run (or a misspelt one): said, not a silent pass.
    code, out, err = result(watch(env, "nobody"))
    assert code == 0 and out["runs"] == [], err
    assert "nothing to watch: nobody has no model repo tagged 'runspec'" in err


def test_the_preflight_says_what_the_watch_needs() -> None:
    from runspec.checkresult import CheckStatus
    from runspec.preflight.watchcheck import watch_check, watch_key_check
    from runspec.spec.loader import load_spec_text

    def spec(extra: str) -> Spec:
        text = (
            "runspec: 1\nname: w\ndataset: {synthetic: {train: 4, val: 2}}\n"
            "train: {model: yolo9-t, epochs: 1}\nbudget: {wall_clock: 1h}\n" + extra
        )
        return load_spec_text(text, "w.yaml")

    hub = "push: {hub: {repo: me/w}, every: 15m}\n"
    check = watch_check(spec(hub))
    assert check.status is CheckStatus.PASS
    assert "lease every 5m00s in me/w: 12 commits an hour beside the pushes' 4" in check.message
    assert "15m00s after its last renewal" in check.message
    busy = watch_check(spec(hub.replace("15m", "1m") + "watch: {lease: 10s}\n"))
    assert busy.status is CheckStatus.WARN and "420 commits an hour" in busy.message
    assert "nothing off this box" in watch_check(spec(hub + "watch: {lease: none}\n")).message
    # Today's boxes, without the watch key: said before training, never silently unwatched.
    [keyed] = watch_key_check(spec(hub), {KEY_VARIABLE: WATCH_KEY})
    assert keyed.status is CheckStatus.PASS
    for environ in ({}, {KEY_VARIABLE: "short"}):
        [unkeyed] = watch_key_check(spec(hub), environ)
        assert unkeyed.status is CheckStatus.WARN, unkeyed
        assert "the lease is unsealed and no watcher acts on it" in unkeyed.message
        assert "openssl rand -hex 32" in unkeyed.fix
    assert watch_key_check(spec(hub + "watch: {lease: none}\n"), {}) == []


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ("push: {hub: {repo: me/w}}\nwatch: {lease: 5s}\n", "at least 10s"),
        ("push: {dir: /tmp/x}\nwatch: {lease: 5m}\n", "set push.hub"),
        ("push: {hub: {repo: me/w}}\nwatch: {lease: soon}\n", "is not a lease"),
        ("push: {hub: {repo: me/w}}\nwatch: {every: 5m}\n", "every"),
    ],
)
def test_watch_lease_is_checked_in_the_spec(extra: str, said: str) -> None:
    from runspec.errors import SpecInvalid
    from runspec.spec.loader import load_spec_text

    text = (
        "runspec: 1\nname: w\ndataset: {synthetic: {train: 4, val: 2}}\n"
        "train: {model: yolo9-t, epochs: 1}\nbudget: {wall_clock: 1h}\n" + extra
    )
    with pytest.raises(SpecInvalid) as caught:
        load_spec_text(text, "w.yaml")
    assert said in str([p.message for p in caught.value.problems])


def _next_pass(out: Any) -> dict[str, Any]:
    """The next pass's JSON document from a watcher's output (each is printed indented)."""
    text = ""
    while line := out.readline():
        text += line
        try:
            doc: dict[str, Any] = json.loads(text)
        except json.JSONDecodeError:
            continue
        return doc
    raise AssertionError(f"the watcher ended: {text!r}")


def _watch_loop(env: dict[str, str], every: str) -> subprocess.Popen[str]:
    """A watcher left running (no --once), its passes as JSON on a pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "runspec", "watch", "--every", every, "--json", REPO],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_the_watcher_left_running_judges_again_every_pass(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    """Without --once (a laptop or a box of its own): each pass reads the lease again, so a box
    that stops vouching while the watcher runs is ended at the next pass, once."""
    box = VastInstance(standin)
    seed(hub_server, lease_doc())
    proc = _watch_loop(env, "2s")
    try:
        assert proc.stdout is not None
        first = _next_pass(proc.stdout)
        assert first["runs"][0]["verdict"] == "alive" and box.effects == []
        seed(hub_server, expired())  # the box hangs while the watcher runs
        verdicts = []
        end = time.monotonic() + 90
        while box.effects == [] and time.monotonic() < end:
            verdicts.append(_next_pass(proc.stdout)["runs"][0]["verdict"])
        assert box.effects == ["PUT"], verdicts
        # The passes after it find the end recorded and call nothing more.
        for _ in range(2):
            _next_pass(proc.stdout)
        assert box.effects == ["PUT"]
        assert lease_at_hub(hub_server)["ended_by"]["action"] == "stop"
    finally:
        proc.terminate()
        proc.wait(30)


def test_each_pass_reaches_a_pipe_while_the_watcher_sleeps(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    """`runspec watch --json | jq`: a pass is written out whole before the watcher sleeps
    (a block-buffered pipe held the passes until a buffer filled, an hour of them here)."""
    VastInstance(standin)
    seed(hub_server, lease_doc())
    proc = _watch_loop(env, "1h")
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "no pass came out of the pipe"
        assert _next_pass(proc.stdout)["runs"][0]["verdict"] == "alive"
    finally:
        proc.terminate()
        proc.wait(30)
