"""AWS's own timer: the box's first renewal arms an EventBridge Scheduler one-time stop at the
deadline plus overrun plus a margin, signed with SigV4 for the scheduler service; the lease and
`runspec status` show it. Against the provider stand-in, whose recorded request is checked."""

from __future__ import annotations

import hmac
import json
from dataclasses import replace
from pathlib import Path

import pytest

from runspec.clock import parse_utc_iso, utc_iso
from runspec.providers.aws import canonical_request, signature, string_to_sign
from runspec.spec.loader import load_spec_text
from runspec.store.paths import RunPaths
from runspec.store.state import RecordStore, RunRecord, RunStatus
from runspec.views.statustable import lease_text
from runspec.watch.renew import LeaseRenewer
from tests.fixtures_providers import Answer, Recorded, StandIn
from tests.hubserver import HubServer

SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
ROLE = "arn:aws:iam::123456789012:role/runspec-scheduler"
SPEC = """runspec: 1
name: timed
dataset: {synthetic: {train: 4, val: 2}}
train: {model: yolo9-t, epochs: 1}
budget: {wall_clock: 1h, overrun: 20m}
push: {hub: {repo: me/timed}}
finish: {action: destroy, provider: aws}
"""


def check_signed(request: Recorded, path: str) -> None:
    """The signature recomputed from what arrived: the body sent is the body signed."""
    auth = request.header("Authorization") or ""
    fields = dict(p.strip().split("=", 1) for p in auth.split(" ", 1)[1].split(","))
    names = fields["SignedHeaders"].split(";")
    wanted = {n: next(v for k, v in request.headers.items() if k.lower() == n) for n in names}
    canonical, _ = canonical_request("POST", path, "", wanted, request.body)
    scope = fields["Credential"].split("/", 1)[1]
    date, region, service = scope.split("/")[:3]
    assert fields["Credential"].startswith("AKIDEXAMPLE/") and service == "scheduler"
    to_sign = string_to_sign(wanted["x-amz-date"], scope, canonical)
    assert hmac.compare_digest(
        fields["Signature"], signature(SECRET, date, region, service, to_sign)
    )


@pytest.fixture
def aws_box(
    standin: StandIn, provider_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> StandIn:
    standin.on("PUT", r"/latest/api/token", Answer(200, "imds-token"))
    standin.on("GET", r"/latest/meta-data/instance-id", Answer(200, "i-0abc123def4567890"))
    env = {
        **provider_env, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_REGION": "eu-central-1", "RUNSPEC_AWS_SCHEDULER_API": f"{standin.url}/scheduler",
        "RUNSPEC_AWS_SCHEDULER_ROLE": ROLE,
    }  # fmt: skip
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return standin


def test_the_first_renewal_arms_aws_s_own_stop(
    hub_server: HubServer, aws_box: StandIn, tmp_path: Path
) -> None:
    aws_box.on("POST", r"/scheduler/schedules/runspec-timed-i-0abc123def4567890")
    spec = load_spec_text(SPEC, "timed.yaml")
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    paths.job_dir.mkdir(parents=True)
    store = RecordStore(tmp_path / "state")
    deadline = utc_iso(1_900_000_000)
    store.save(RunRecord("timed", "0" * 64, status=RunStatus.TRAINING, deadline=deadline))
    hub_server.put_file("me/timed", "README.md", b"# timed\n", repo_type="model")
    said: list[str] = []
    renewer = LeaseRenewer(spec, paths, store, say=said.append)
    assert renewer.renew()
    [request] = aws_box.made("POST", r"/scheduler/schedules/.*")
    check_signed(request, "/scheduler/schedules/runspec-timed-i-0abc123def4567890")
    body = request.json()
    at = parse_utc_iso(deadline) + 20 * 60 + 600
    assert body["ScheduleExpression"] == f"at({utc_iso(at)[:19]})"
    assert (
        body["ScheduleExpressionTimezone"] == "UTC" and body["FlexibleTimeWindow"]["Mode"] == "OFF"
    )
    assert body["ActionAfterCompletion"] == "DELETE"
    target = body["Target"]
    assert target["Arn"] == "arn:aws:scheduler:::aws-sdk:ec2:stopInstances"
    assert target["RoleArn"] == ROLE
    assert json.loads(target["Input"]) == {"InstanceIds": ["i-0abc123def4567890"]}
    lease = json.loads(hub_server.read_file("me/timed", "runspec/lease.json", repo_type="model"))
    assert lease["timer"]["at"] == utc_iso(at) and lease["timer"]["action"] == "stop"
    assert lease["provider"] == "aws" and lease["region"] == "eu-central-1"
    assert SECRET not in json.dumps(lease)
    shown = json.loads(paths.lease_file.read_text())
    assert f"provider timer: stop at {utc_iso(at)}" in lease_text(shown)
    # Armed once: the next renewal makes no second schedule.
    assert renewer.renew()
    assert len(aws_box.made("POST", r"/scheduler/schedules/.*")) == 1
    # The run ends: the schedule goes with it (a box kept on purpose is not AWS's to stop).
    aws_box.on("DELETE", r"/scheduler/schedules/runspec-timed-i-0abc123def4567890")
    record = store.load("timed")
    assert record is not None
    store.save(replace(record, status=RunStatus.FINISHED, ended_at=utc_iso(1_899_999_000)))
    renewer.finish()
    [gone] = aws_box.made("DELETE", r"/scheduler/schedules/.*")
    assert gone.path == "/scheduler/schedules/runspec-timed-i-0abc123def4567890"
    assert "scheduler/aws4_request" in (gone.header("Authorization") or "")
    assert any("provider timer removed" in line for line in said)


def test_no_role_no_timer_and_it_says_so(
    hub_server: HubServer, aws_box: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNSPEC_AWS_SCHEDULER_ROLE")
    spec = load_spec_text(SPEC, "timed.yaml")
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    paths.job_dir.mkdir(parents=True)
    store = RecordStore(tmp_path / "state")
    store.save(RunRecord("timed", "0" * 64, status=RunStatus.TRAINING, deadline=utc_iso(2e9)))
    said: list[str] = []
    LeaseRenewer(spec, paths, store, say=said.append).renew()
    assert not aws_box.made("POST", r"/scheduler/.*")
    assert any(
        "no provider timer" in line and "RUNSPEC_AWS_SCHEDULER_ROLE" in line for line in said
    )
