"""The end against the providers' documented answers: each refusal a real service gives is read
as that service means it, so the machine's billing still ends (tests/provider_apis.py says
where each stand-in's answers come from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runspec.clock import ManualClock
from runspec.machine.finish import FinishContext, apply_finish
from runspec.machine.host import FinishHost
from runspec.providers import Action
from runspec.providers.answers import said
from runspec.providers.gcp import GCP
from runspec.providers.hetzner import Hetzner
from runspec.providers.persist import Attempt, Refused, Window, keep_ending
from runspec.providers.vast import Vast
from runspec.spec.loader import load_spec_text
from tests.fixtures_providers import Answer, StandIn, VastInstance
from tests.provider_apis import GCE_INSTANCE, LOCAL_SSD_400, GceInstance, HetznerServer

HCLOUD = "hcloud-token-xyz"


def window(clock: ManualClock, seconds: float = 600.0) -> Window:
    return Window(until=clock.monotonic() + seconds)


def test_a_gcp_stop_of_a_vm_with_local_ssds_ends_its_billing(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    clock = ManualClock()
    vm = GceInstance(standin, clock, local_ssds=2)
    gcp = GCP(provider_env, clock=clock, confirm_timeout=30.0, poll_interval=3.0)

    outcome = keep_ending(gcp, Action.STOP, window(clock))

    assert outcome.confirmed and outcome.state == "STOPPING", outcome
    assert vm.refused == []  # GCE never had to answer the Local SSD 400
    (stop,) = standin.made("POST", GCE_INSTANCE + r"/stop.*")
    assert stop.path.endswith("/stop?discardLocalSsd=true")
    assert "discardLocalSsd=true" in outcome.call  # the call printed is the call made


def test_a_gcp_stop_whose_disks_cannot_be_read_first_is_sent_again_with_the_flag(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    clock = ManualClock()
    vm = GceInstance(standin, clock, local_ssds=1, unreadable=2)
    gcp = GCP(provider_env, clock=clock, confirm_timeout=30.0, poll_interval=3.0)

    outcome = keep_ending(gcp, Action.STOP, window(clock))

    assert outcome.confirmed, outcome
    assert vm.refused == [LOCAL_SSD_400]  # one 400, read as "say discardLocalSsd", not as no
    assert [r.path.rsplit("/", 1)[-1] for r in standin.made("POST")] == [
        "stop",
        "stop?discardLocalSsd=true",
    ]


def test_the_gcp_token_is_fetched_anew_before_it_expires(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    clock = ManualClock()
    vm = GceInstance(standin, clock, token_life=3599)
    gcp = GCP(provider_env, clock=clock)
    instance = gcp.identify()
    assert gcp.state(instance) == "RUNNING"  # the preflight's read, with the first token
    clock.advance(3600)  # the end comes an hour later: that token has expired

    outcome = keep_ending(gcp, Action.DESTROY, window(clock))

    assert outcome.confirmed and outcome.state == "gone", outcome
    assert vm.refused == []  # no request went out with the expired token
    assert len(vm.tokens) == 2
    (delete,) = standin.made("DELETE")
    assert delete.header("Authorization") == "Bearer ya29.token-1"


def test_a_hetzner_server_locked_by_a_running_action_is_asked_again(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    clock = ManualClock()
    server = HetznerServer(standin, locks=2)
    hetzner = Hetzner({**provider_env, "HCLOUD_TOKEN": HCLOUD}, clock=clock, confirm_timeout=30.0)
    attempts: list[Attempt] = []

    outcome = keep_ending(hetzner, Action.DESTROY, window(clock), on_attempt=attempts.append)

    assert outcome.confirmed and outcome.state == "gone", outcome
    assert server.deletes == [423, 423, 200]
    assert "HTTP 423: locked: server is locked" in attempts[0].answer


def test_a_hetzner_read_token_is_refused_in_one_clear_line(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    clock = ManualClock()
    HetznerServer(standin, read_only=True)
    hetzner = Hetzner({**provider_env, "HCLOUD_TOKEN": HCLOUD}, clock=clock)

    with pytest.raises(Refused) as refused:
        keep_ending(hetzner, Action.DESTROY, window(clock))

    line = str(refused.value)
    assert "HTTP 403: forbidden: insufficient permissions for this request" in line
    assert line.endswith("(a Read token may only GET: give runspec a Read & Write token)")
    assert "\n" not in line and HCLOUD not in line


def test_a_vast_200_with_success_false_is_a_failure_with_its_message(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    clock = ManualClock()
    msg = "Instance 4242 is locked by a pending operation; try again later."
    refusal = Answer(200, {"success": False, "error": "invalid_args", "msg": msg})
    vast_api = VastInstance(standin, deletes=(refusal, refusal, Answer(200)))
    env = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "vast-key-abc"}
    vast = Vast(env, clock=clock, confirm_timeout=30.0, poll_interval=3.0)
    attempts: list[Attempt] = []

    outcome = keep_ending(vast, Action.DESTROY, window(clock), on_attempt=attempts.append)

    assert outcome.confirmed, outcome
    assert vast_api.effects == ["DELETE"]  # the two refusals took no effect
    assert [a.answer for a in attempts[:2]] == [
        f"vast: DELETE {vast.api}/instances/4242/: HTTP 200 with success false: invalid_args: {msg}"
    ] * 2
    # Refused for the whole window: the outcome names vast's reason, not "still running".
    VastInstance(standin, deletes=(refusal,))
    short = keep_ending(vast, Action.DESTROY, window(clock, 60.0))
    assert not short.confirmed and msg in short.detail


@pytest.mark.parametrize(
    ("body", "line", "code"),
    [
        (  # Hetzner Cloud, "Errors"
            b'{"error": {"code": "locked", "message": "server is locked", "details": {}}}',
            "locked: server is locked",
            "locked",
        ),
        (  # GCE: Google's JSON error, the reason of its first error as the code
            b'{"error": {"code": 403, "message": "Required permission", "errors": '
            b'[{"reason": "forbidden", "message": "Required permission"}]}}',
            "forbidden: Required permission",
            "forbidden",
        ),
        (  # Lambda Cloud's ApiErrorResponse
            b'{"error": {"code": "global/invalid-api-key", "message": "API key was invalid",'
            b' "suggestion": "Check your API key"}}',
            "global/invalid-api-key: API key was invalid (Check your API key)",
            "global/invalid-api-key",
        ),
        (  # vast.ai's 429 on a stop
            b'{"detail": "API requests too frequent endpoint threshold=1.0"}',
            "API requests too frequent endpoint threshold=1.0",
            None,
        ),
        (  # EC2's error XML
            b"<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are "
            b"not authorized\n to perform this operation.</Message></Error></Errors></Response>",
            "UnauthorizedOperation: You are not authorized to perform this operation.",
            "UnauthorizedOperation",
        ),
        (
            b"<html>\n<body>Bad Gateway</body>\n</html>",
            "<html> <body>Bad Gateway</body> </html>",
            None,
        ),
        (b'{"error": {"message": "' + b"x" * 5000 + b'"}}', "x" * 200, None),
        (  # a terminal escape and a right-to-left override in a body are shown, not obeyed
            b'{"msg": "gone\\u001b[2J\\u202eevil"}',
            "gone\\x1b[2J\\u202eevil",
            None,
        ),
    ],
)
def test_each_providers_error_body_becomes_one_line(
    body: bytes, line: str, code: str | None
) -> None:
    found = said(body)
    assert (found.text, found.code) == (line, code)


def test_an_unverified_end_on_an_a3_vm_stops_it_and_its_billing(
    standin: StandIn, provider_env: dict[str, str], tmp_path: Path
) -> None:
    """The issue's case: the final push could not be verified, so the default
    `finish.unverified: stop` stops the VM; on a VM with Local SSDs that stop must be sent
    as GCE accepts it, or the GPU bills on."""
    vm = GceInstance(standin, ManualClock(), local_ssds=2)
    text = (
        "runspec: 1\nname: a3\ndataset: {synthetic: {}}\n"
        "train: {model: yolo9-t, epochs: 3, device: cpu}\npush: {dir: /tmp/runspec-test-pushed}\n"
        "budget: {wall_clock: 10m, overrun: 5m}\nfinish: {action: destroy, provider: gcp}\n"
    )
    spec = load_spec_text(text, "a3.yaml")
    lines: list[str] = []
    virt = ("/nonexistent/systemd-detect-virt",)
    host = FinishHost(root=tmp_path, detect_virt=virt, poweroff_commands=(), env=provider_env)
    result = apply_finish(
        spec.finish,
        FinishContext(spec.name, None, "/state/runs/a3"),
        verified=False,
        dry_run=False,
        clock=ManualClock(),
        log=lines.append,
        host=host,
    )
    assert result.ok and result.action == "stop", (result, lines)
    assert vm.status == "STOPPING" and vm.refused == []
    assert any("discardLocalSsd=true" in line for line in lines), lines
