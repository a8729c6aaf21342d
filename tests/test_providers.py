"""Provider adapters at the HTTP level, against local stand-ins that record every request."""

from __future__ import annotations

import hashlib
import hmac
import urllib.parse
from pathlib import Path

import pytest

from runspec.clock import ManualClock
from runspec.providers import Action, ProviderError, detect, get_provider
from runspec.providers.aws import AWS, canonical_request, signature, string_to_sign
from runspec.providers.gcp import GCP
from runspec.providers.hetzner import Hetzner
from runspec.providers.lambda_cloud import LambdaCloud
from runspec.providers.runpod import RunPod
from runspec.providers.vast import Vast
from tests.fixtures_providers import Answer, StandIn

VAST_KEY = "vast-key-0123456789abcdef"
RUNPOD_KEY = "rpa_SECRET_RUNPOD_KEY"
LAMBDA_KEY = "secret_lambda_key_abc"
HCLOUD = "hcloud-token-xyz"
GCP_TOKEN = "ya29.gcp-access-token"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


def quick(**kw: float) -> dict[str, object]:
    """Adapters driven by a manual clock: polling never sleeps for real."""
    return {"clock": ManualClock(), "confirm_timeout": 30.0, "poll_interval": 3.0, **kw}


# vast.ai


def vast_env(env: dict[str, str]) -> dict[str, str]:
    return {**env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": VAST_KEY}


def test_vast_destroy_deletes_the_instance_and_confirms_it_gone(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    standin.on("DELETE", r"/api/v0/instances/4242/", Answer(200, {"success": True}))
    standin.on(
        "GET",
        r"/api/v0/instances/4242/",
        Answer(200, {"instances": {"actual_status": "running", "intended_status": "running"}}),
        Answer(200, {"instances": None}),
    )
    vast = Vast(vast_env(provider_env), **quick())  # type: ignore[arg-type]
    outcome = vast.apply(Action.DESTROY)

    assert outcome.confirmed and outcome.state == "gone" and outcome.instance == "4242"
    (delete,) = standin.made("DELETE")
    assert delete.path == "/api/v0/instances/4242/"
    assert delete.header("Authorization") == f"Bearer {VAST_KEY}"
    assert len(standin.made("GET")) == 2  # polled until the instance was gone
    assert not standin.made("PUT")


def test_vast_stop_puts_state_stopped(standin: StandIn, provider_env: dict[str, str]) -> None:
    standin.on("PUT", r"/api/v0/instances/4242/", Answer(200, {"success": True}))
    standin.on(
        "GET",
        r"/api/v0/instances/4242/",
        Answer(200, {"instances": {"actual_status": "stopped", "intended_status": "stopped"}}),
    )
    outcome = Vast(vast_env(provider_env), **quick()).apply(Action.STOP)  # type: ignore[arg-type]

    (put,) = standin.made("PUT")
    assert put.path == "/api/v0/instances/4242/"
    assert put.json() == {"state": "stopped"}
    assert put.header("Authorization") == f"Bearer {VAST_KEY}"
    assert outcome.confirmed and outcome.state == "stopped"
    assert not standin.made("DELETE")


def test_vast_reads_id_and_key_from_pid1_environ(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    Path(provider_env["RUNSPEC_PROC_ENVIRON"]).write_bytes(
        b"PATH=/usr/bin\0CONTAINER_ID=777\0CONTAINER_API_KEY=" + VAST_KEY.encode() + b"\0"
    )
    standin.on("DELETE", r"/api/v0/instances/777/", Answer(200, {"success": True}))
    standin.on("GET", r"/api/v0/instances/777/", Answer(404, {"error": "no such instance"}))
    outcome = Vast(provider_env, **quick()).apply(Action.DESTROY)  # type: ignore[arg-type]

    assert outcome.confirmed and outcome.instance == "777"
    assert standin.made("DELETE")[0].header("Authorization") == f"Bearer {VAST_KEY}"


def test_vast_refusal_is_an_error_without_the_key(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    # The stand-in echoes the key back, as some APIs do in their error bodies.
    standin.on("DELETE", r"/api/v0/instances/4242/", Answer(403, {"msg": f"bad key {VAST_KEY}"}))
    with pytest.raises(ProviderError) as err:
        Vast(vast_env(provider_env), **quick()).apply(Action.DESTROY)  # type: ignore[arg-type]
    message = str(err.value)
    assert "HTTP 403" in message and "DELETE" in message
    assert VAST_KEY not in message and "<redacted>" in message


def test_vast_server_error_and_missing_key(standin: StandIn, provider_env: dict[str, str]) -> None:
    standin.on("PUT", r"/api/v0/instances/4242/", Answer(502, "bad gateway"))
    with pytest.raises(ProviderError, match="HTTP 502"):
        Vast(vast_env(provider_env), **quick()).apply(Action.STOP)  # type: ignore[arg-type]
    with pytest.raises(ProviderError, match="CONTAINER_API_KEY"):
        Vast({**provider_env, "CONTAINER_ID": "4242"}, **quick()).apply(Action.STOP)  # type: ignore[arg-type]


def test_a_provider_that_does_not_answer_times_out(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    standin.on("DELETE", r"/api/v0/instances/4242/", Answer(200, {}, delay=3.0))
    vast = Vast(vast_env(provider_env), timeout=0.5, **quick())  # type: ignore[arg-type]
    with pytest.raises(ProviderError, match=r"no answer within 0\.5 s"):
        vast.apply(Action.DESTROY)


def test_an_instance_still_running_is_reported_unconfirmed_after_bounded_polls(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    standin.on("DELETE", r"/api/v0/instances/4242/", Answer(200, {"success": True}))
    standin.on(
        "GET",
        r"/api/v0/instances/4242/",
        Answer(200, {"instances": {"actual_status": "running", "intended_status": "running"}}),
    )
    outcome = Vast(vast_env(provider_env), **quick()).apply(Action.DESTROY)  # type: ignore[arg-type]

    assert not outcome.confirmed
    assert outcome.state == "running"
    assert "still reports 'running'" in outcome.detail
    # 30 s of confirmation at one poll every 3 s: bounded, about 11 polls.
    assert 5 <= len(standin.made("GET")) <= 12


# RunPod


def test_runpod_terminate_and_stop(standin: StandIn, provider_env: dict[str, str]) -> None:
    env = {**provider_env, "RUNPOD_POD_ID": "pod-abc", "RUNPOD_API_KEY": RUNPOD_KEY}
    standin.on("DELETE", r"/v1/pods/pod-abc", Answer(204))
    standin.on("POST", r"/v1/pods/pod-abc/stop", Answer(200, {"desiredStatus": "EXITED"}))
    standin.on(
        "GET",
        r"/v1/pods/pod-abc",
        Answer(200, {"id": "pod-abc", "desiredStatus": "RUNNING"}),
        Answer(200, {"id": "pod-abc", "desiredStatus": "EXITED"}),
    )
    stopped = RunPod(env, **quick()).apply(Action.STOP)  # type: ignore[arg-type]
    assert stopped.confirmed and stopped.state == "EXITED"
    (stop,) = standin.made("POST")
    assert stop.path == "/v1/pods/pod-abc/stop"
    assert stop.header("Authorization") == f"Bearer {RUNPOD_KEY}"

    standin.on("GET", r"/v1/pods/pod-abc", Answer(404, {"error": "pod not found"}))
    gone = RunPod(env, **quick()).apply(Action.DESTROY)  # type: ignore[arg-type]
    assert gone.confirmed and gone.state == "gone"
    (delete,) = standin.made("DELETE")
    assert delete.path == "/v1/pods/pod-abc"
    assert delete.header("Authorization") == f"Bearer {RUNPOD_KEY}"


# Lambda


def test_lambda_terminates_and_cannot_stop(standin: StandIn, provider_env: dict[str, str]) -> None:
    env = {**provider_env, "RUNSPEC_LAMBDA_INSTANCE_ID": "0920582c7ff041399e34823a0be62549"}
    env["LAMBDA_API_KEY"] = LAMBDA_KEY
    standin.on(
        "POST",
        r"/api/v1/instance-operations/terminate",
        Answer(200, {"data": {"terminated_instances": []}}),
    )
    standin.on("GET", r"/api/v1/instances/\w+", Answer(200, {"data": {"status": "terminating"}}))
    outcome = LambdaCloud(env, **quick()).apply(Action.DESTROY)  # type: ignore[arg-type]

    assert outcome.confirmed and outcome.state == "terminating"
    (post,) = standin.made("POST")
    assert post.json() == {"instance_ids": ["0920582c7ff041399e34823a0be62549"]}
    assert post.header("Authorization") == f"Bearer {LAMBDA_KEY}"
    with pytest.raises(ProviderError, match="cannot be stopped"):
        LambdaCloud(env, **quick()).apply(Action.STOP)  # type: ignore[arg-type]
    assert len(standin.made("POST")) == 1  # the refused stop sent nothing


# Hetzner


def test_hetzner_reads_metadata_and_deletes_the_server(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    env = {**provider_env, "HCLOUD_TOKEN": HCLOUD}
    standin.on("GET", r"/hetzner/v1/metadata/instance-id", Answer(200, "42001337"))
    standin.on("DELETE", r"/v1/servers/42001337", Answer(200, {"action": {"id": 9}}))
    standin.on(
        "GET",
        r"/v1/servers/42001337",
        Answer(200, {"server": {"id": 42001337, "status": "running"}}),
        Answer(404, {"error": {"code": "not_found"}}),
    )
    outcome = Hetzner(env, **quick()).apply(Action.DESTROY)  # type: ignore[arg-type]

    assert outcome.confirmed and outcome.instance == "42001337"
    (delete,) = standin.made("DELETE")
    assert delete.header("Authorization") == f"Bearer {HCLOUD}"
    meta = standin.made("GET", r"/hetzner/v1/metadata/instance-id")[0]
    assert meta.header("Authorization") is None  # the token never goes to the metadata server
    with pytest.raises(ProviderError, match="bills in full"):
        Hetzner(env, **quick()).apply(Action.STOP)  # type: ignore[arg-type]


# GCP


def gcp_routes(standin: StandIn) -> None:
    standin.on("GET", r"/computeMetadata/v1/instance/name", Answer(200, "trainer-1"))
    standin.on(
        "GET",
        r"/computeMetadata/v1/instance/zone",
        Answer(200, "projects/123/zones/europe-west4-a"),
    )
    standin.on("GET", r"/computeMetadata/v1/project/project-id", Answer(200, "my-proj"))
    standin.on(
        "GET",
        r"/computeMetadata/v1/instance/service-accounts/default/token",
        Answer(200, {"access_token": GCP_TOKEN, "expires_in": 3599, "token_type": "Bearer"}),
    )


def test_gcp_deletes_and_stops_through_the_compute_api(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    gcp_routes(standin)
    instance = r"/compute/v1/projects/my-proj/zones/europe-west4-a/instances/trainer-1"
    standin.on("DELETE", instance, Answer(200, {"kind": "compute#operation"}))
    standin.on("POST", instance + "/stop", Answer(200, {"kind": "compute#operation"}))
    standin.on(
        "GET", instance, Answer(200, {"status": "RUNNING"}), Answer(200, {"status": "STOPPING"})
    )
    stopped = GCP(provider_env, **quick()).apply(Action.STOP)  # type: ignore[arg-type]
    assert stopped.confirmed and stopped.state == "STOPPING"

    standin.on("GET", instance, Answer(404, {"error": {"code": 404}}))
    deleted = GCP(provider_env, **quick()).apply(Action.DESTROY)  # type: ignore[arg-type]
    assert deleted.confirmed and deleted.state == "gone"

    for meta in standin.made("GET", r"/computeMetadata/.*"):
        assert meta.header("Metadata-Flavor") == "Google"
    for call in standin.made("POST") + standin.made("DELETE"):
        assert call.header("Authorization") == f"Bearer {GCP_TOKEN}"
    assert [r.path for r in standin.made("POST")] == [
        "/compute/v1/projects/my-proj/zones/europe-west4-a/instances/trainer-1/stop"
    ]


def test_gcp_refusal_does_not_leak_the_token(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    gcp_routes(standin)
    instance = r"/compute/v1/projects/my-proj/zones/europe-west4-a/instances/trainer-1"
    standin.on("DELETE", instance, Answer(403, {"error": f"token {GCP_TOKEN} lacks permission"}))
    with pytest.raises(ProviderError) as err:
        GCP(provider_env, **quick()).apply(Action.DESTROY)  # type: ignore[arg-type]
    assert "HTTP 403" in str(err.value) and GCP_TOKEN not in str(err.value)


# AWS


def test_sigv4_matches_the_aws_test_suite() -> None:
    # AWS's Signature Version 4 test suite, case get-vanilla-query-order-key (2011 edition).
    canonical, signed = canonical_request(
        "GET",
        "/",
        "foo=Zoo&foo=aha",
        {"Date": "Mon, 09 Sep 2011 23:36:00 GMT", "Host": "host.foo.com"},
        b"",
    )
    assert signed == "date;host"
    assert hashlib.sha256(canonical.encode()).hexdigest() == (
        "e25f777ba161a0f1baf778a87faf057187cf5987f17953320e3ca399feb5f00d"
    )
    to_sign = string_to_sign("20110909T233600Z", "20110909/us-east-1/host/aws4_request", canonical)
    assert signature(AWS_SECRET, "20110909", "us-east-1", "host", to_sign) == (
        "be7148d34ebccdc6423b19085378aa0bee970bdc61d144bd1a8c48c33079ab09"
    )


def aws_routes(standin: StandIn, role: bool = False) -> None:
    standin.on("PUT", r"/latest/api/token", Answer(200, "imds-session-token"))
    standin.on("GET", r"/latest/meta-data/instance-id", Answer(200, "i-0abc123def4567890"))
    standin.on("GET", r"/latest/meta-data/placement/region", Answer(200, "eu-central-1"))
    if role:
        standin.on(
            "GET", r"/latest/meta-data/iam/security-credentials/", Answer(200, "trainer-role")
        )
        standin.on(
            "GET",
            r"/latest/meta-data/iam/security-credentials/trainer-role",
            Answer(
                200,
                {"AccessKeyId": "ASIAROLE", "SecretAccessKey": AWS_SECRET, "Token": "role-session"},
            ),
        )


def describe(state: str) -> str:
    return (
        '<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
        "<reservationSet><item><instancesSet><item><instanceId>i-0abc123def4567890</instanceId>"
        f"<instanceState><code>32</code><name>{state}</name></instanceState>"
        "</item></instancesSet></item></reservationSet></DescribeInstancesResponse>"
    )


def ec2_router(standin: StandIn, states: list[str]) -> None:
    """POST /ec2: TerminateInstances/StopInstances answer OK; DescribeInstances walks `states`."""
    ok = '<TerminateInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"/>'
    answers = [Answer(200, ok)] + [Answer(200, describe(s)) for s in states]
    standin.on("POST", r"/ec2/", *answers)


def verify_sigv4(request: object, secret: str, region: str) -> None:
    """Recompute the signature the way the server does, from what arrived."""
    headers = request.headers  # type: ignore[attr-defined]
    auth = request.header("Authorization")  # type: ignore[attr-defined]
    fields = dict(part.strip().split("=", 1) for part in auth.split(" ", 1)[1].split(","))
    names = fields["SignedHeaders"].split(";")
    wanted = {n: next(v for k, v in headers.items() if k.lower() == n) for n in names}
    canonical, signed = canonical_request(
        "POST",
        "/ec2/",
        "",
        wanted,
        request.body,  # type: ignore[attr-defined]
    )
    assert signed == fields["SignedHeaders"]
    assert {"host", "x-amz-date", "content-type"} <= set(names)
    scope = fields["Credential"].split("/", 1)[1]
    date = scope.split("/")[0]
    assert scope == f"{date}/{region}/ec2/aws4_request"
    to_sign = string_to_sign(wanted["x-amz-date"], scope, canonical)
    assert hmac.compare_digest(fields["Signature"], signature(secret, date, region, "ec2", to_sign))


def test_aws_terminates_with_imdsv2_and_sigv4(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    env = {**provider_env, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": AWS_SECRET}
    aws_routes(standin)
    ec2_router(standin, ["running", "shutting-down"])
    outcome = AWS(env, **quick()).apply(Action.DESTROY)  # type: ignore[arg-type]

    assert outcome.confirmed and outcome.state == "shutting-down"
    (token,) = standin.made("PUT", r"/latest/api/token")
    assert token.header("X-aws-ec2-metadata-token-ttl-seconds") == "300"
    for meta in standin.made("GET", r"/latest/meta-data/.*"):
        assert meta.header("X-aws-ec2-metadata-token") == "imds-session-token"
    calls = standin.made("POST", r"/ec2/")
    first = urllib.parse.parse_qs(calls[0].body.decode())
    assert first == {
        "Action": ["TerminateInstances"],
        "InstanceId.1": ["i-0abc123def4567890"],
        "Version": ["2016-11-15"],
    }
    assert [urllib.parse.parse_qs(c.body.decode())["Action"][0] for c in calls[1:]] == [
        "DescribeInstances",
        "DescribeInstances",
    ]
    assert calls[0].header("Authorization").startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    verify_sigv4(calls[0], AWS_SECRET, "eu-central-1")


def test_aws_stop_with_instance_role_credentials(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    aws_routes(standin, role=True)
    ec2_router(standin, ["stopping"])
    outcome = AWS(provider_env, **quick()).apply(Action.STOP)  # type: ignore[arg-type]

    assert outcome.confirmed and outcome.state == "stopping"
    call = standin.made("POST", r"/ec2/")[0]
    assert urllib.parse.parse_qs(call.body.decode())["Action"] == ["StopInstances"]
    assert call.header("x-amz-security-token") == "role-session"
    assert call.header("Authorization").startswith("AWS4-HMAC-SHA256 Credential=ASIAROLE/")
    verify_sigv4(call, AWS_SECRET, "eu-central-1")


def test_aws_refusal_names_the_request_not_the_secret(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    env = {**provider_env, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": AWS_SECRET}
    aws_routes(standin)
    standin.on(
        "POST",
        r"/ec2/",
        Answer(
            403,
            f"<Response><Errors><Error><Code>UnauthorizedOperation</Code>"
            f"<Message>{AWS_SECRET}</Message></Error></Errors></Response>",
        ),
    )
    with pytest.raises(ProviderError) as err:
        AWS(env, **quick()).apply(Action.DESTROY)  # type: ignore[arg-type]
    assert "HTTP 403" in str(err.value) and "UnauthorizedOperation" in str(err.value)
    assert AWS_SECRET not in str(err.value)


# Detection


def test_detect_reads_environment_pid1_and_dmi(provider_env: dict[str, str]) -> None:
    assert detect(provider_env) is None
    assert detect({**provider_env, "RUNPOD_POD_ID": "p"}) == ("runpod", "RUNPOD_POD_ID is set")
    assert detect({**provider_env, "RUNSPEC_LAMBDA_INSTANCE_ID": "x"})[0] == "lambda"  # type: ignore[index]
    Path(provider_env["RUNSPEC_PROC_ENVIRON"]).write_bytes(b"CONTAINER_API_KEY=k\0")
    assert detect(provider_env) == ("vast", "CONTAINER_API_KEY is set")
    Path(provider_env["RUNSPEC_PROC_ENVIRON"]).write_bytes(b"")
    dmi = Path(provider_env["RUNSPEC_DMI_DIR"])
    for vendor, name in (("Amazon EC2", "aws"), ("Google", "gcp"), ("Hetzner", "hetzner")):
        (dmi / "sys_vendor").write_text(vendor + "\n")
        found = detect(provider_env)
        assert found is not None and found[0] == name


def test_get_provider_auto_without_a_provider_says_so(provider_env: dict[str, str]) -> None:
    with pytest.raises(ProviderError, match="name the provider in the spec"):
        get_provider("auto", provider_env)
    provider, how = get_provider("hetzner", provider_env)
    assert provider.name == "hetzner" and how == "finish.provider"
    with pytest.raises(ProviderError, match="unknown provider"):
        get_provider("ovh", provider_env)
