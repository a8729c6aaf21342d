"""The preflight proves the end can be made, not only seen: where the provider can check a
permission without acting (EC2's DryRun, GCE's testIamPermissions) a key that may only read
fails it; where it cannot (vast, RunPod, Lambda, Hetzner) the check says what it proved and
what it could not. The Hub's push check reads the member's role in the org."""

from __future__ import annotations

from pathlib import Path

import pytest

from runspec.checkresult import CheckStatus
from runspec.clock import ManualClock
from runspec.machine.host import FinishHost
from runspec.preflight.checks import push_check
from runspec.preflight.ending import finish_checks
from runspec.spec.loader import load_spec_text
from runspec.store.paths import RunPaths
from tests.fixtures_providers import Answer, StandIn
from tests.hubserver import HubServer
from tests.provider_apis import (
    COMPUTE_READONLY,
    Ec2Instance,
    GceInstance,
    HetznerServer,
)
from tests.test_preflight_ending import finish_of, statuses
from tests.test_providers import AWS_SECRET, aws_routes


def aws_env(env: dict[str, str]) -> dict[str, str]:
    return {**env, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": AWS_SECRET}


def test_an_aws_key_that_may_only_read_fails_the_preflight(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    aws_routes(standin)
    ec2 = Ec2Instance(standin, allowed=("DescribeInstances",))
    (end, unverified) = finish_checks(
        finish_of("{action: destroy, provider: aws}"), aws_env(provider_env)
    )

    assert end.status is CheckStatus.FAIL, end
    assert "may not TerminateInstances on i-0abc123def4567890" in end.message
    assert "UnauthorizedOperation" in end.message and "ec2:TerminateInstances" in end.message
    assert unverified.status is CheckStatus.WARN and "ec2:StopInstances" in unverified.message

    ec2.allowed = ("DescribeInstances", "StopInstances", "TerminateInstances")
    (end, unverified) = finish_checks(
        finish_of("{action: destroy, provider: aws}"), aws_env(provider_env)
    )
    assert end.status is CheckStatus.PASS, end
    assert "DryRun proves TerminateInstances allowed on i-0abc123def4567890" in end.message
    assert unverified.status is CheckStatus.PASS, unverified
    assert ec2.acted == [] and ec2.state == "running"  # proven, and nothing was ended
    assert AWS_SECRET not in end.message + unverified.message


def test_a_gcp_service_account_that_may_only_read_fails_the_preflight(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    vm = GceInstance(standin, ManualClock(), granted=("compute.instances.get",))
    stop = finish_of("{action: stop, provider: gcp, unverified: keep}")

    (end, _) = finish_checks(stop, provider_env)
    assert end.status is CheckStatus.FAIL, end
    assert "lacks compute.instances.stop" in end.message
    assert "roles/compute.instanceAdmin.v1" in end.message
    assert vm.status == "RUNNING"  # asked, not tried


def test_a_gcp_vm_with_the_read_only_compute_scope_fails_the_preflight(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    GceInstance(standin, ManualClock(), scopes=(COMPUTE_READONLY,))
    (end, _) = finish_checks(finish_of("{action: destroy, provider: gcp}"), provider_env)
    assert end.status is CheckStatus.FAIL, end
    assert "compute.readonly" in end.message and "cloud-platform scope" in end.message


def test_a_gcp_stop_says_it_discards_the_local_ssds(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    vm = GceInstance(standin, ManualClock(), local_ssds=2)
    (end, _) = finish_checks(
        finish_of("{action: stop, provider: gcp, unverified: keep}"), provider_env
    )
    assert end.status is CheckStatus.PASS, end
    assert "testIamPermissions grants compute.instances.stop" in end.message
    assert "a stop discards the data on its Local SSD (local-ssd-0, local-ssd-1)" in end.message
    assert vm.status == "RUNNING" and standin.made("POST", r".*/stop.*") == []


@pytest.mark.parametrize(
    ("provider", "env", "routes"),
    [
        (
            "vast",
            {"CONTAINER_ID": "4242", "CONTAINER_API_KEY": "k"},
            [
                ("GET", r"/api/v0/instances/4242/", {"instances": {"actual_status": "running"}}),
            ],
        ),
        (
            "runpod",
            {"RUNPOD_POD_ID": "pod1", "RUNPOD_API_KEY": "k"},
            [
                ("GET", r"/v1/pods/pod1", {"id": "pod1", "desiredStatus": "RUNNING"}),
            ],
        ),
        (
            "lambda",
            {"RUNSPEC_LAMBDA_INSTANCE_ID": "lam1", "LAMBDA_API_KEY": "k"},
            [
                ("GET", r"/api/v1/instances/lam1", {"data": {"id": "lam1", "status": "active"}}),
            ],
        ),
    ],
)
def test_where_no_dry_run_exists_the_preflight_names_the_destroy_unproven(
    standin: StandIn,
    provider_env: dict[str, str],
    provider: str,
    env: dict[str, str],
    routes: list[tuple[str, str, object]],
) -> None:
    for method, path, body in routes:
        standin.on(method, path, Answer(200, body))
    finish = finish_of(f"{{action: destroy, provider: {provider}, unverified: keep}}")
    (end, _) = finish_checks(finish, {**provider_env, **env})
    assert end.status is CheckStatus.PASS, end
    assert "whether it may destroy it is known only at the end" in end.message
    assert {r.method for r in standin.made()} == {"GET"}


def test_a_hetzner_read_token_is_named_as_unproven(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    server = HetznerServer(standin, read_only=True)
    finish = finish_of("{action: destroy, provider: hetzner, unverified: keep}")
    (end, _) = finish_checks(finish, {**provider_env, "HCLOUD_TOKEN": "read-token"})
    assert end.status is CheckStatus.PASS, end
    assert "the key can read instance 42001337; whether it may destroy it" in end.message
    assert "README's Providers says how to make a key that may" in end.message
    assert server.deletes == []


def _hub_spec(tmp_path: Path, repo: str) -> tuple[object, RunPaths]:
    doc = (
        "runspec: 1\nname: pf\ndataset: {synthetic: {}}\nbudget: {wall_clock: 10m}\n"
        f"train: {{model: yolo9-t, epochs: 3}}\npush: {{hub: {{repo: {repo}}}}}\n"
    )
    spec = load_spec_text(doc, "pf.yaml")
    return spec, RunPaths.for_spec(spec, tmp_path / "state")


@pytest.mark.parametrize("role", ["read", "no_access"])
def test_an_org_member_whose_role_cannot_push_fails_the_push_check(
    tmp_path: Path, hub_server: HubServer, role: str
) -> None:
    hub_server.whoami = {
        "name": "me",
        "type": "user",
        "orgs": [{"name": "lab", "type": "org", "roleInOrg": role}],
        "auth": {"type": "access_token", "accessToken": {"displayName": "t", "role": "write"}},
    }
    spec, paths = _hub_spec(tmp_path, "lab/detector")
    result = push_check(spec, paths)  # type: ignore[arg-type]
    assert result.status is CheckStatus.FAIL, result
    assert f"'me' is a member of 'lab' with the role '{role}'" in result.message
    assert "write role" in result.fix


def test_an_org_member_with_the_write_role_passes_the_push_check(
    tmp_path: Path, hub_server: HubServer
) -> None:
    hub_server.whoami = {
        "name": "me",
        "orgs": [{"name": "lab", "roleInOrg": "write"}, {"name": "other", "roleInOrg": "read"}],
        "auth": {"accessToken": {"role": "write"}},
    }
    spec, paths = _hub_spec(tmp_path, "lab/detector")
    assert push_check(spec, paths).status is CheckStatus.PASS  # type: ignore[arg-type]
    # whoami is the Hub's answer: a field of the wrong shape tells nothing, and crashes nothing.
    hub_server.whoami = {"name": "me", "orgs": "lab", "auth": ["x"]}
    result = push_check(spec, paths)  # type: ignore[arg-type]
    assert result.status is CheckStatus.FAIL and "not 'lab' nor one of its orgs" in result.message


def gce_root(tmp_path: Path) -> Path:
    """A GCE A3 machine as runspec reads it: two NVMe Local SSDs joined in an md RAID0 mounted
    at /mnt/scratch (as the guest environment's udev rules name them), the boot disk at /."""
    root = tmp_path / "root"
    (root / "dev/disk/by-id").mkdir(parents=True)
    for n, disk in enumerate(("nvme0n2", "nvme0n3")):
        (root / "dev" / disk).touch()
        (root / "dev/disk/by-id" / f"google-local-nvme-ssd-{n}").symlink_to(f"../../{disk}")
        (root / "sys/block/md0/slaves").mkdir(parents=True, exist_ok=True)
        (root / "sys/block/md0/slaves" / disk).touch()
    (root / "dev/nvme0n1").touch()
    (root / "dev/disk/by-id/google-persistent-disk-0").symlink_to("../../nvme0n1")
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/mountinfo").write_text(
        "25 1 259:1 / / rw,relatime - ext4 /dev/nvme0n1p1 rw\n"
        "90 25 9:0 / /mnt/scratch rw,relatime - ext4 /dev/md0 rw,discard\n"
    )
    return root


def test_a_gcp_stop_that_would_discard_the_runs_own_folders_is_refused(
    standin: StandIn, provider_env: dict[str, str], tmp_path: Path
) -> None:
    GceInstance(standin, ManualClock(), local_ssds=2)
    host = FinishHost(root=gce_root(tmp_path))
    scratch = (Path("/mnt/scratch/runspec"), Path("/mnt/scratch/runspec/runs"))
    stop = finish_of("{action: stop, provider: gcp, unverified: keep}")

    results = finish_checks(stop, provider_env, host, folders=scratch)
    (refused,) = [r for r in results if r.status is CheckStatus.FAIL]
    assert "finish.action stop would lose this run's folders" in refused.message
    assert "/mnt/scratch/runspec (/dev/md0)" in refused.message
    assert "boot disk or a persistent disk" in refused.fix

    # On the boot disk: the stop keeps them, and passes.
    boot = (Path("/var/lib/runspec"), Path("/var/lib/runspec/runs"))
    assert CheckStatus.FAIL not in statuses(finish_checks(stop, provider_env, host, folders=boot))
    # A destroy whose unverified fallback is a stop: said, as a warning.
    destroy = finish_of("{action: destroy, provider: gcp}")
    results = finish_checks(destroy, provider_env, host, folders=scratch)
    warned = [r for r in results if r.status is CheckStatus.WARN]
    assert any("finish.unverified stop would lose" in r.message for r in warned), warned
