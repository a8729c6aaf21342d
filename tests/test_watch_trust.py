"""What the watcher trusts: nothing a lease says until it proves it was sealed for its repo by
the run it names, and nothing a Hub answer holds past a size, a total time and a strict reading.

Each hostile lease is built here and put in the local Hub stand-in as anyone with write access
to a repo of the org could put it; the watcher is `runspec watch --once` as a real process with
the provider stand-in behind its key.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from runspec.clock import utc_iso
from runspec.machineowner import engine_owned
from tests.fixtures_providers import Answer, StandIn, VastInstance
from tests.fixtures_watch import (
    REPO,
    expired,
    lease_at_hub,
    lease_doc,
    result,
    sealed,
    seed,
    watch,
    watcher_env,
)
from tests.hubserver import HubServer

CARD = b"---\ntags:\n- runspec\n---\n# a run\n"


@pytest.fixture
def env(hub_env: dict[str, str], standin: StandIn, tmp_path: Path) -> dict[str, str]:
    return watcher_env(hub_env, standin, tmp_path / "watcher-home")


def tagged(hub: HubServer, *repos: str) -> None:
    for repo in repos:
        hub.put_file(repo, "README.md", CARD, repo_type="model")


def by_repo(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {run["repo"]: run for run in out["runs"]}


@pytest.mark.parametrize("forgery", ["unsealed", "copied from the run's repo", "another key"])
def test_a_forged_lease_in_a_second_repo_of_the_org_ends_nothing(
    hub_server: HubServer, standin: StandIn, env: dict[str, str], forgery: str
) -> None:
    box = VastInstance(standin)  # a healthy run's instance, its lease renewed in me/hung
    tagged(hub_server, REPO, "me/forged")
    seed(hub_server, lease_doc())
    # Anyone in the org makes a repo with the tag and a lease naming that instance: expired,
    # its final push "verified", so the old watcher destroyed the healthy box.
    doc = expired(final_verified=True, state="finishing")
    if forgery == "unsealed":
        seed(hub_server, doc, repo="me/forged", seal_it=False)
    elif forgery == "copied from the run's repo":  # a genuine seal, made for me/hung
        seed(hub_server, json.dumps(sealed(doc, REPO)).encode(), repo="me/forged")
    else:
        forged = sealed(doc, "me/forged", key="a key the watcher does not hold, 32+ chars")
        seed(hub_server, json.dumps(forged).encode(), repo="me/forged")
    code, out, err = result(watch(env, "me"))
    assert box.effects == [] and standin.made("DELETE") == [] and standin.made("PUT") == []
    runs = by_repo(out)
    assert runs[REPO]["verdict"] == "alive"
    assert runs["me/forged"]["verdict"] == "unproven" and runs["me/forged"]["called"] is False
    assert code == 1 and "me/forged: cannot judge its lease, nothing called" in err
    assert "ended_by" not in lease_at_hub(hub_server, "me/forged")


def test_a_watcher_without_the_watch_key_acts_on_no_lease(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    box = VastInstance(standin)
    seed(hub_server, expired())
    env = {k: v for k, v in env.items() if k != "RUNSPEC_WATCH_KEY"}
    code, out, err = result(watch(env, REPO))
    assert code == 1 and box.effects == []
    assert "RUNSPEC_WATCH_KEY is not set here" in out["runs"][0]["error"], err


def test_an_instance_claimed_by_two_repos_is_ended_by_neither(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    box = VastInstance(standin)
    tagged(hub_server, "me/one", "me/two")
    seed(hub_server, expired(run="one"), repo="me/one")
    seed(hub_server, expired(run="two"), repo="me/two")
    code, out, _ = result(watch(env, "me"))
    assert code == 1 and box.effects == [] and standin.made("PUT") == []
    for run in out["runs"]:
        assert "vast instance 4242 is claimed by another repo's lease too" in run["error"]


@pytest.mark.parametrize(
    "claim",
    [
        {
            "ended_by": {
                "by": "watch",
                "reason": "x",
                "action": "stop",
                "at": "2026-01-01T00:00:00Z",
            }
        },
        {"state": "finished"},
        {"vouched_until": "9999-12-31T00:00:00+00:00"},
    ],
)
def test_a_forged_claim_over_the_run_s_lease_does_not_turn_the_watch_off(
    hub_server: HubServer, standin: StandIn, env: dict[str, str], claim: dict[str, Any]
) -> None:
    VastInstance(standin)
    # Someone with write access replaces the hung run's lease with one that says it ended,
    # finished, or vouches until year 9999: the old watcher went quiet (exit 0, "ended",
    # "final" or "alive") while the box kept billing.
    seed(hub_server, {**expired(), **claim}, seal_it=False)
    code, out, _ = result(watch(env, REPO))
    assert code == 1 and out["runs"][0]["verdict"] == "unproven"


def test_a_genuine_lease_vouches_a_few_leases_past_its_renewal_at_most(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    box = VastInstance(standin)
    renewed = time.time() - 3600  # an hour ago, lease 5m: it vouched until 9999, it says
    seed(hub_server, lease_doc(renewed_at=utc_iso(renewed), vouched_until="9999-12-31T00:00:00Z"))
    code, out, err = result(watch(env, REPO))
    assert code == 0, err
    assert out["runs"][0]["verdict"] == "end" and box.effects == ["PUT"]


def test_a_renewal_in_the_future_is_reported_not_believed(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    box = VastInstance(standin)
    far = "9999-12-31T00:00:00+00:00"  # renewed in 9999, so vouched until 9999 in its bound
    seed(hub_server, lease_doc(renewed_at=far, vouched_until=far))
    code, out, _ = result(watch(env, REPO))
    assert code == 1 and box.effects == []
    assert (
        out["runs"][0]["verdict"] == "notify" and "renewed in the future" in out["runs"][0]["error"]
    )


DEEP = b'{"schema": 1, "timer": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"  # under 64 KB


@pytest.mark.parametrize(
    "hostile",
    [
        DEEP,
        json.dumps(expired(lease_s=float("nan"), instance="4343")).encode(),
        json.dumps(expired(lease_s=float("inf"), instance="4343")).encode(),
        json.dumps({**expired(instance="4343"), "epoch": {"a": [1]}}).encode(),
        json.dumps(sealed(expired(instance="4343", lease_s=3e9), "me/hostile")).encode(),
    ],
    ids=["deep", "nan", "infinity", "typed", "a century's interval"],
)
def test_one_hostile_lease_is_reported_and_the_pass_ends_every_other_box(
    hub_server: HubServer, standin: StandIn, env: dict[str, str], hostile: bytes
) -> None:
    box = VastInstance(standin)
    tagged(hub_server, REPO, "me/hostile")
    seed(hub_server, expired())
    seed(hub_server, hostile, repo="me/hostile")
    code, out, err = result(watch(env, "me"))
    runs = by_repo(out)
    assert runs[REPO]["verdict"] == "end" and box.effects == ["PUT"], err
    assert runs["me/hostile"]["verdict"] == "error" and runs["me/hostile"]["called"] is False
    assert code == 1


def test_lease_fields_are_shown_escaped(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    VastInstance(standin)
    ended = {"by": "\x1b]0;pwned\x07watch", "reason": "\x1b[2J", "action": "stop", "at": "now"}
    seed(hub_server, expired(ended_by=ended))
    _, out, err = result(watch(env, REPO))
    assert out["runs"][0]["verdict"] == "ended", err
    assert "\x1b" not in err and "\\x1b]0;pwned\\x07watch" in err


@pytest.mark.parametrize("region", ["127.0.0.1:8443/#", "evil.example.com", "us-east-1.x.io/"])
def test_a_region_that_is_no_region_name_sends_no_signed_request(
    hub_server: HubServer, standin: StandIn, env: dict[str, str], region: str
) -> None:
    standin.on("POST", r"/ec2/", Answer(200, "<x/>"))
    seed(hub_server, expired(provider="aws", instance="i-0abc123def4567890", region=region))
    env = {
        **env,
        "AWS_ACCESS_KEY_ID": "AKIDWATCHER",
        "AWS_SECRET_ACCESS_KEY": "watcher-secret",
        "AWS_SESSION_TOKEN": "watcher-session",
        "RUNSPEC_AWS_EC2_API": f"{standin.url}/ec2",
    }
    code, out, _ = result(watch(env, REPO))
    assert standin.made() == []  # nothing signed with the watcher's keys went anywhere
    assert code == 1 and "region name like us-east-1" in out["runs"][0]["error"]


class _Drip(BaseHTTPRequestHandler):
    """A Hub in front of the stand-in that serves one repo's lease a byte at a time."""

    upstream = ""
    slow = re.compile(r"^/me/drip/resolve/.*/lease\.json$")

    def _forward(self) -> None:
        import urllib.request

        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
        req = urllib.request.Request(
            self.upstream + self.path, data=data, headers=headers, method=self.command
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, body, kind = resp.status, resp.read(), resp.headers["Content-Type"]
        except urllib.error.HTTPError as exc:
            status, body, kind = exc.code, exc.read(), exc.headers["Content-Type"]
        self.send_response(status)
        self.send_header("Content-Type", kind or "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        slow = bool(self.slow.match(self.path))
        for i in range(len(body)) if slow else ():
            self.wfile.write(body[i : i + 1])
            self.wfile.flush()
            time.sleep(0.2)
        if not slow and self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_HEAD = do_PUT = _forward

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def dripping(hub_server: HubServer) -> Iterator[Callable[[str], str]]:
    """A Hub address in front of the stand-in that drips the answers to paths matching a
    pattern a byte at a time."""
    servers: list[ThreadingHTTPServer] = []

    def start(slow: str) -> str:
        attrs = {"upstream": hub_server.url, "slow": re.compile(slow)}
        server = ThreadingHTTPServer(("127.0.0.1", 0), type("Drip", (_Drip,), attrs))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_lease_served_a_byte_at_a_time_costs_its_repo_only(
    hub_server: HubServer,
    standin: StandIn,
    env: dict[str, str],
    dripping: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runspec.watch import lease
    from runspec.watch.act import WatchOptions
    from runspec.watch.fleet import watch_pass

    box = VastInstance(standin)
    seed(hub_server, expired())
    seed(hub_server, expired(run="drip", instance="4343"), repo="me/drip")
    drip = dripping(r"^/me/drip/resolve/.*/lease\.json$")
    for key, value in {**env, "HF_ENDPOINT": drip}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(lease, "READ_TIMEOUT_S", 2.0)  # a lease is ~600 bytes: 2 minutes
    said: list[str] = []
    seen, ok = watch_pass(["me/drip", REPO], WatchOptions(), [], say=said.append)
    assert not ok
    runs = {s.repo: s for s in seen}
    assert runs["me/drip"].error and "not served within 2s" in runs["me/drip"].error
    assert runs[REPO].verdict == "end" and box.effects == ["PUT"], runs[REPO]


@pytest.mark.parametrize("sealed_by", [None, "a key the box does not hold, 32 characters+"])
def test_a_box_renews_over_an_ended_by_no_watcher_with_the_key_wrote(
    hub_server: HubServer,
    hub_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sealed_by: str | None,
) -> None:
    from runspec.spec.loader import load_spec_text
    from runspec.store.paths import RunPaths
    from runspec.store.state import RecordStore, RunRecord, RunStatus
    from runspec.watch.renew import LeaseRenewer
    from runspec.watch.seal import KEY_VARIABLE
    from tests.fixtures_watch import WATCH_KEY

    for key, value in {**hub_env, KEY_VARIABLE: WATCH_KEY}.items():
        monkeypatch.setenv(key, value)
    # Someone with write access to the run's repo says a watcher ended this box: the box
    # stopped renewing, the lease expired, and a real watcher stopped a healthy run.
    forged = lease_doc(ended_by={"by": "watch", "reason": "x", "action": "stop", "at": "now"})
    if sealed_by is None:
        seed(hub_server, forged, seal_it=False)
    else:
        seed(hub_server, json.dumps(sealed(forged, REPO, key=sealed_by)).encode())
    text = (
        "runspec: 1\nname: hung\ndataset: {synthetic: {train: 4, val: 2}}\n"
        "train: {model: yolo9-t, epochs: 1}\nbudget: {wall_clock: 1h}\n"
        f"push: {{hub: {{repo: {REPO}}}}}\nwatch: {{lease: 5m}}\n"
    )
    spec = load_spec_text(text, "hung.yaml")
    store = RecordStore(tmp_path / "state")
    store.save(RunRecord(name="hung", spec_sha256="0" * 64, status=RunStatus.TRAINING, epoch=1))
    paths = RunPaths.decide(spec, tmp_path / "state")
    said: list[str] = []
    renewer = LeaseRenewer(
        spec, paths, store, say=said.append, owner=engine_owned("SkyPilot", eager_push=False)
    )
    assert renewer.renew() is True and renewer.ended_by is None, said
    lease = lease_at_hub(hub_server)
    assert lease["ended_by"] is None and lease["state"] == "training"
    from runspec.watch.seal import proves

    assert proves(WATCH_KEY.encode(), REPO, lease)  # sealed by the box's own key


def test_an_org_listing_served_a_byte_at_a_time_ends_the_pass_in_its_time(
    hub_server: HubServer,
    standin: StandIn,
    env: dict[str, str],
    dripping: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runspec.watch import fleet
    from runspec.watch.act import WatchOptions

    box = VastInstance(standin)
    tagged(hub_server, REPO)
    seed(hub_server, expired())
    for key, value in {**env, "HF_ENDPOINT": dripping(r"^/api/models\?")}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(fleet, "LIST_S", 2.0)
    seen, ok = fleet.watch_pass(["me"], WatchOptions(), [], say=lambda _: None)
    assert not ok and box.effects == []
    assert seen[0].error is not None and "no answer within 2s" in seen[0].error


def test_the_watcher_s_own_long_record_reads_back_as_a_lease(
    hub_server: HubServer, standin: StandIn, env: dict[str, str]
) -> None:
    import hashlib

    box = VastInstance(standin)
    path = "weights/" + "w" * 120 + ".pt"  # a long name makes a long reason for the stop
    hub_server.put_file(REPO, path, b"pushed", repo_type="model")
    listed = {path: {"size": 6, "sha256": hashlib.sha256(b"listed").hexdigest()}}
    seed(hub_server, expired(final_verified=True, state="finishing", final_weights=listed))
    code, out, err = result(watch(env, REPO))
    assert code == 0 and box.effects == ["PUT"], err
    assert len(out["runs"][0]["reason"]) > 256
    code, out, err = result(watch(env, REPO))  # the next pass reads what the first wrote
    assert code == 0 and out["runs"][0]["verdict"] == "ended", err
