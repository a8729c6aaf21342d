"""The preflight proves the end: a wrong provider setup, a poweroff that cannot work, a missing
finish command are found before the run starts, not at hour 8, and nothing is changed by
looking (the provider only sees one GET of the instance's state)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from runspec.checkresult import CheckStatus
from runspec.machine.host import FinishHost
from runspec.preflight.ending import finish_checks
from runspec.spec.loader import load_spec_text
from runspec.spec.model import FinishSpec
from tests.fixtures_providers import Answer, StandIn, vast_answers_stopped

KEY = "vast-key-preflight-test"
RUNSPEC = [sys.executable, "-m", "runspec"]


def finish_of(text: str) -> FinishSpec:
    doc = (
        "runspec: 1\nname: pf\ndataset: {synthetic: {}}\n"
        "train: {model: yolo9-t, epochs: 1, device: cpu}\nbudget: {wall_clock: 10m}\n"
        f"push: {{hub: {{repo: me/pf}}}}\nfinish: {text}\n"
    )
    return load_spec_text(doc, "pf.yaml").finish


def statuses(results: list) -> list[CheckStatus]:  # type: ignore[type-arg]
    return [r.status for r in results]


def test_a_vast_destroy_is_proven_with_one_read_only_call(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    vast_answers_stopped(standin)
    standin.on(
        "GET", r"/api/v0/instances/4242/", Answer(200, {"instances": {"actual_status": "running"}})
    )
    env = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": KEY}
    results = finish_checks(finish_of("{action: destroy, provider: vast}"), env)
    assert statuses(results) == [CheckStatus.PASS, CheckStatus.PASS], results
    assert "vast instance 4242 (CONTAINER_ID) reads 'running'" in results[0].message
    assert {r.method for r in standin.made()} == {"GET"}  # nothing was stopped or destroyed
    assert all(KEY not in r.message for r in results)


def test_an_unidentified_or_refused_provider_fails_naming_what_is_missing(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    finish = finish_of("{action: destroy, provider: vast}")
    (missing,) = [r for r in finish_checks(finish, provider_env) if r.status is CheckStatus.FAIL]
    assert "CONTAINER_ID is not set" in missing.message
    # The fix names the cause: this machine is no vast.ai container (no key would help).
    assert missing.fix.startswith("this machine is not a vast.ai container"), missing.fix
    assert "finish.provider" in missing.fix and "/etc/runspec/env" not in missing.fix
    nokey = {**provider_env, "CONTAINER_ID": "4242"}
    (nokey_fail,) = [r for r in finish_checks(finish, nokey) if r.status is CheckStatus.FAIL]
    assert "CONTAINER_API_KEY is not set" in nokey_fail.message
    assert "/etc/runspec/env" in nokey_fail.fix
    standin.on("GET", r"/api/v0/instances/4242/", Answer(401, {"error": "bad key"}))
    env = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "wrong"}
    (refused,) = [r for r in finish_checks(finish, env) if r.status is CheckStatus.FAIL]
    assert "HTTP 401" in refused.message
    auto = finish_checks(finish_of("{action: destroy, provider: auto}"), provider_env)
    assert auto[0].status is CheckStatus.FAIL and "does not look like" in auto[0].message
    hetzner = finish_checks(finish_of("{action: stop, provider: hetzner}"), provider_env)
    assert hetzner[0].status is CheckStatus.FAIL


def test_poweroff_command_and_unverified_are_checked(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "proc/1").mkdir(parents=True)
    (root / "proc/1/cgroup").write_text("0::/docker/abc\n")
    container = FinishHost(root=root, detect_virt=("/nonexistent/systemd-detect-virt",))
    results = finish_checks(finish_of("{action: poweroff, unverified: keep}"), {}, container)
    assert results[0].status is CheckStatus.FAIL and "container" in results[0].message
    missing = finish_checks(finish_of("{action: command, command: [no-such-tool]}"), {})
    assert missing[0].status is CheckStatus.FAIL and "'no-such-tool' is not on PATH" in (
        missing[0].message
    )
    # The default unverified choice is stop: a provider that cannot be reached is a warning.
    assert missing[1].status is CheckStatus.WARN and "finish.unverified" in missing[1].message
    fine = finish_checks(finish_of("{action: command, command: [/bin/true], unverified: keep}"), {})
    assert statuses(fine) == [CheckStatus.PASS, CheckStatus.PASS]
    assert statuses(finish_checks(finish_of("{action: none}"), {})) == [CheckStatus.PASS]


def test_runspec_preflight_fails_a_destroy_vast_cannot_identify(
    tmp_path: Path, provider_env: dict[str, str]
) -> None:
    spec = tmp_path / "gone.yaml"
    spec.write_text(
        "runspec: 1\nname: gone\ndataset: {synthetic: {}}\n"
        "train: {model: yolo9-t, epochs: 1, device: cpu, args: {pretrained: false}}\n"
        "budget: {wall_clock: 10m}\n"
        f"push: {{dir: {tmp_path / 'volume'}}}\n"
        "preflight: {doctor: false, disk: 100MB}\n"
        "finish: {action: stop, provider: vast}\n"
    )
    out = subprocess.run(
        [*RUNSPEC, "preflight", str(spec), "--json", "--state", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **provider_env},
        check=False,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    report = json.loads(out.stdout)
    (failure,) = [c for c in report["checks"] if c["status"] == "fail"]
    assert failure["name"] == "finish" and "CONTAINER_ID is not set" in failure["message"]
