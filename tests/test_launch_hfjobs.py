"""`runspec launch SPEC --on hf-jobs`: the request the real huggingface_hub client sends to the
Jobs stand-in of the local Hub (tests/hubjobs.py): flavor, timeout, secret, command."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import HfApi

from runspec.cli import build_parser
from runspec.engines.hfjobs import TORCH_VERSION
from runspec.engines.onbox import Engine, detect
from tests.hubjobs import HARDWARE
from tests.hubserver import HubServer

REPO = Path(__file__).resolve().parent.parent
# An https archive: HF's default image (pytorch/pytorch:*-runtime) has no git.
INSTALL = "runspec[train] @ https://example.org/runspec/archive/v0.1.0.tar.gz"

SPEC = """\
runspec: 1
name: hf-run.1
dataset:
  hub: {repo: my-org/data, file: d.tar}
  data: d/data.yaml
train:
  model: yolo9-t
  epochs: 50
  batch: 64
resources:
  gpus: "A100-80GB:8"
push:
  hub: {repo: my-org/run}
budget:
  wall_clock: 2h
  overrun: 20m
"""


def _gpu(name: str, model: str, count: int, vram_gb: int, micro: int) -> dict[str, Any]:
    """One flavor as HF's /api/jobs/hardware answers it (huggingface_hub's JobHardwareInfo and
    JobAccelerator read these keys; `vram` is the flavor's total, as JobAccelerator's docstring
    says), under a name huggingface_hub's JobHardware enum lists."""
    return {
        "name": name,
        "prettyName": f"{count}x Nvidia {model}",
        "cpu": "8 vCPU",
        "ram": "32 GB",
        "ephemeralStorage": "1000 GB" if count == 8 else "200 GB",
        "accelerator": {
            "type": "gpu",
            "model": model,
            "quantity": str(count),
            "vram": f"{vram_gb * count} GB",
            "manufacturer": "Nvidia",
        },
        "unitCostMicroUSD": micro,
        "unitCostUSD": micro / 1e6,
        "unitLabel": "minute",
    }


# HF's flavors as its listing has them, cheapest first: no H100 (HF rents none), A100s with
# 80 GB each. Set here rather than read from the stand-in's default listing, so these tests say
# which listing they judge against.
HF_LISTING: list[dict[str, Any]] = [
    {
        "name": "cpu-basic",
        "prettyName": "CPU Basic",
        "cpu": "2 vCPU",
        "ram": "16 GB",
        "ephemeralStorage": "50 GB",
        "unitCostMicroUSD": 167,
        "unitCostUSD": 0.000167,
        "unitLabel": "minute",
    },
    _gpu("a10g-small", "A10G", 1, 24, 16667),
    _gpu("a100-large", "A100", 1, 80, 41667),
    _gpu("a100x4", "A100", 4, 80, 166667),
    _gpu("a100x8", "A100", 8, 80, 333333),
]


@pytest.fixture(autouse=True)
def _hf_listing(hub_server: HubServer) -> None:
    hub_server.jobs.hardware = [dict(item) for item in HF_LISTING]


def _launch(
    tmp_path: Path, hub_env: dict[str, str], *argv: str, text: str = SPEC
) -> subprocess.CompletedProcess[str]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "runspec", "launch", str(spec), "--on", "hf-jobs", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
        env={**os.environ, **hub_env, "RUNSPEC_INSTALL": INSTALL},
    )


def test_the_job_asks_for_the_flavor_a_timeout_past_the_budget_and_the_token_as_a_secret(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str], hub_token: str
) -> None:
    result = _launch(tmp_path, hub_env, "--namespace", "my-org")
    assert result.returncode == 0, result.stderr
    [request] = hub_server.jobs.requests
    # No --flavor: the one whose GPUs are resources.gpus', from the hardware listing.
    assert request["flavor"] == "a100x8"
    # HF's default (30 min) would cut a 2 h run; the timeout covers install + budget + overrun.
    assert request["timeoutSeconds"] == (15 + 120 + 20) * 60
    assert request["attempts"] == 2
    assert request["secrets"] == {"HF_TOKEN": hub_token}
    sent_in_the_open = repr(request["environment"]) + repr(request["command"])
    assert hub_token not in sent_in_the_open
    assert request["environment"]["RUNSPEC_SPEC_YAML"] == SPEC
    assert request["command"][:2] == ["bash", "-c"]
    script = request["command"][2]
    assert script.startswith(f"pip install --quiet '{INSTALL}' && ")
    assert script.endswith("exec runspec run runspec-spec.yaml --engine hf-jobs")
    assert TORCH_VERSION in request["dockerImage"]
    assert request["labels"] == {"runspec": "hf-run-1", "name": "hf-run-1"}
    # It says the job and how to follow it; the job is there for the real client.
    [job_id] = hub_server.jobs.jobs
    assert f"job {job_id} submitted" in result.stdout
    assert f"hf jobs logs -f 'my-org/{job_id}'" in result.stdout
    assert hub_token not in result.stdout + result.stderr
    api = HfApi(endpoint=hub_server.url, token=hub_token)
    assert api.inspect_job(job_id=job_id, namespace="my-org").status.stage == "RUNNING"


def test_the_job_knows_it_runs_under_hf_jobs_so_a_second_attempt_resumes(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    # Issue 36: HF Jobs sets no variable runspec can recognise (runspec.engines.onbox), so a
    # job that did not name its engine ran its second attempt as a fresh run: a new budget,
    # training from epoch 1, the record overwritten, and a finish: preflight on every attempt.
    result = _launch(tmp_path, hub_env, "--namespace", "my-org")
    assert result.returncode == 0, result.stderr
    [request] = hub_server.jobs.requests
    script = shlex.split(request["command"][2])
    run = script[script.index("exec") + 1 :]
    assert run[:2] == ["runspec", "run"]
    args = build_parser().parse_args(run[1:])
    # The command line names the engine; the environment carries the launch's task id, the
    # run's identity in its attempt ledger: each attempt of this job shares it, a new launch
    # is a new run (issue 36).
    engine = detect(request["environment"], args.engine)
    assert engine is not None and engine.engine is Engine.HF_JOBS
    assert engine.task_id is not None and engine.task_id.startswith("hf-")
    assert detect(request["environment"]) is None  # an id alone names no engine
    _launch(tmp_path, hub_env, "--namespace", "my-org")
    again = hub_server.jobs.requests[1]["environment"]["RUNSPEC_TASK_ID"]
    assert again != engine.task_id


def test_the_stand_in_answers_the_real_client_as_hf_jobs_does(
    hub_server: HubServer, hub_token: str
) -> None:
    hub_server.jobs.hardware = [dict(item) for item in HARDWARE]  # HF's own, in its own order
    api = HfApi(endpoint=hub_server.url, token=hub_token)
    job = api.run_job(image="python:3.12", command=["true"], namespace="me", timeout="1h")
    assert hub_server.jobs.requests[0]["timeoutSeconds"] == 3600
    assert [j.id for j in api.list_jobs(namespace="me")] == [job.id]
    hub_server.jobs.logs[job.id] = ["epoch 1", "epoch 2"]
    hub_server.jobs.set_stage(job.id, "COMPLETED")
    assert list(api.fetch_job_logs(job_id=job.id, namespace="me")) == ["epoch 1", "epoch 2"]
    api.cancel_job(job_id=job.id, namespace="me")
    assert api.inspect_job(job_id=job.id, namespace="me").status.stage == "CANCELED"
    names = [hw.name for hw in api.list_jobs_hardware()]
    assert names[:2] == ["cpu-basic", "cpu-upgrade"] and "h100" not in names


def test_without_a_flavor_the_cheapest_that_fits_is_asked_for_not_the_first_listed(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    # HF's listing is not sorted by price: a10g-large ($1.50/h) comes before a10g-small ($1.00).
    hub_server.jobs.hardware = [dict(item) for item in HARDWARE]  # HF's own, in its own order
    text = SPEC.replace('gpus: "A100-80GB:8"', 'gpus: "A10G:1"').replace("batch: 64", "batch: 8")
    result = _launch(tmp_path, hub_env, "--namespace", "my-org", text=text)
    assert result.returncode == 0, result.stderr
    assert [r["flavor"] for r in hub_server.jobs.requests] == ["a10g-small"]


def test_without_namespace_it_bills_the_token_owner(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    hub_server.whoami = {"name": "alice", "type": "user", "orgs": []}
    result = _launch(tmp_path, hub_env, "--json")
    assert result.returncode == 0, result.stderr
    [job] = hub_server.jobs.jobs.values()
    assert job["owner"]["name"] == "alice"
    assert f'"job_id": "{job["id"]}"' in result.stdout


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ("--flavor", "a10g-small"),
            "flavor a10g-small has 1 x A10G, not the resources.gpus A100-80GB:8",
        ),
        (
            ("--flavor", "h900"),
            "no flavor 'h900'; HF Jobs has: a100-large, a100x4, a100x8, a10g-small, cpu-basic",
        ),
    ],
)
def test_a_flavor_the_listing_refutes_is_refused_before_anything_is_sent(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str], argv: tuple[str, ...], said: str
) -> None:
    result = _launch(tmp_path, hub_env, "--namespace", "my-org", *argv)
    assert result.returncode == 2
    assert said in result.stderr
    assert hub_server.jobs.requests == []


def test_an_unreadable_listing_takes_the_flavor_named_and_asks_for_one_otherwise(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    hub_server.jobs.hardware_down = True
    unnamed = _launch(tmp_path, hub_env, "--namespace", "my-org")
    assert unnamed.returncode == 2
    assert "name the flavor with --flavor" in unnamed.stderr
    named = _launch(tmp_path, hub_env, "--namespace", "my-org", "--flavor", "a100x8")
    assert named.returncode == 0, named.stderr
    assert [r["flavor"] for r in hub_server.jobs.requests] == ["a100x8"]


def test_what_hf_jobs_cannot_rent_is_refused(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    text = SPEC.replace('gpus: "A100-80GB:8"\n', 'gpus: "A100-80GB:8"\n  nodes: 2\n  spot: true\n')
    result = _launch(tmp_path, hub_env, "--namespace", "my-org", "--flavor", "a100x8", text=text)
    assert result.returncode == 2
    assert "resources.nodes must be 1" in result.stderr
    assert "HF Jobs rents no spot machines" in result.stderr
    assert hub_server.jobs.requests == []


def test_the_image_carries_the_torch_the_project_pins() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    pinned = re.search(r"torch==(\S+)", makefile)
    assert pinned is not None and pinned.group(1) == TORCH_VERSION


def test_an_unreachable_hub_is_said_so_and_nothing_is_launched(
    tmp_path: Path, hub_env: dict[str, str]
) -> None:
    closed = {**hub_env, "HF_ENDPOINT": "http://127.0.0.1:9"}
    result = _launch(tmp_path, closed, "--namespace", "my-org", "--flavor", "a100x8")
    assert result.returncode == 1
    assert "HF Jobs did not take the job: cannot reach the Hub at http://127.0.0.1:9" in (
        result.stderr
    )


@pytest.mark.parametrize("attempts", ["0", "-1", "x", "²", "١"])  # isdigit() takes the last two
def test_attempts_are_a_small_positive_number(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str], attempts: str
) -> None:
    result = _launch(tmp_path, hub_env, "--namespace", "my-org", "--attempts", attempts)
    assert result.returncode == 2
    assert "is not a number of attempts" in result.stderr
    assert hub_server.jobs.requests == []


def test_a_disk_larger_than_the_flavor_holds_is_refused(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    text = SPEC.replace('  gpus: "A100-80GB:8"\n', '  gpus: "A100-80GB:8"\n  disk: 2TB\n')
    result = _launch(tmp_path, hub_env, "--namespace", "my-org", text=text)
    assert result.returncode == 2
    assert "flavor a100x8 has 1000 GB of disk; resources.disk asks for 2000 GB" in result.stderr
    assert hub_server.jobs.requests == []


@pytest.mark.parametrize(
    ("gpus", "flavor"),
    [
        ("A100-80GB:8", "a100x8"),
        ("A100:4", "a100x4"),
        ("a100-80gb", "a100-large"),
        ("A10G:1", "a10g-small"),
    ],
)
def test_accelerator_names_match_hfs_the_way_people_write_them(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str], gpus: str, flavor: str
) -> None:
    # SkyPilot's names (A100-80GB, the memory in the name) against HF's listing (model A100,
    # its memory in vram): issue 36 found A100-80GB never matched.
    text = SPEC.replace('gpus: "A100-80GB:8"', f'gpus: "{gpus}"').replace("batch: 64", "batch: 8")
    result = _launch(tmp_path, hub_env, "--namespace", "my-org", text=text)
    assert result.returncode == 0, result.stderr
    assert [r["flavor"] for r in hub_server.jobs.requests] == [flavor]


@pytest.mark.parametrize(
    ("gpus", "said"),
    [
        ("H100:8", "HF Jobs has no H100: its GPUs are A10G (1), A100 (1, 4, 8)"),
        ("A100-40GB:1", "HF Jobs has no A100-40GB: its GPUs are A10G (1), A100 (1, 4, 8)"),
        ("A100:2", "HF Jobs has A100 in flavors of 1, 4, 8, not 2"),
    ],
)
def test_a_gpu_hf_does_not_rent_is_refused_with_what_it_has(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str], gpus: str, said: str
) -> None:
    text = SPEC.replace('gpus: "A100-80GB:8"', f'gpus: "{gpus}"').replace("batch: 64", "batch: 8")
    result = _launch(tmp_path, hub_env, "--namespace", "my-org", text=text)
    assert result.returncode == 2
    assert said in result.stderr
    assert hub_server.jobs.requests == []


def test_a_github_git_install_becomes_an_archive_hfs_image_can_install(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    # pytorch/pytorch's runtime images carry no git: pip cannot fetch a git+https reference.
    git = "runspec[train] @ git+https://github.com/my-org/runspec.git@v0.1.0"
    result = _launch(tmp_path, hub_env, "--namespace", "my-org", "--install", git)
    assert result.returncode == 0, result.stderr
    [request] = hub_server.jobs.requests
    archive = "runspec[train] @ https://github.com/my-org/runspec/archive/v0.1.0.tar.gz"
    assert request["command"][2].startswith(f"pip install --quiet '{archive}' && ")
    assert "git+" not in request["command"][2]


def test_another_git_install_is_refused_on_hfs_image_and_kept_on_one_with_git(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    git = "runspec[train] @ git+https://git.example.org/runspec@v0.1.0"
    refused = _launch(tmp_path, hub_env, "--namespace", "my-org", "--install", git)
    assert refused.returncode == 2
    assert "has no git" in refused.stderr and "archive" in refused.stderr
    assert hub_server.jobs.requests == []
    kept = _launch(
        tmp_path, hub_env, "--namespace", "my-org", "--install", git, "--image", "python:3.12"
    )
    assert kept.returncode == 0, kept.stderr
    assert hub_server.jobs.requests[0]["command"][2].startswith(f"pip install --quiet '{git}'")


def test_notify_secrets_go_to_the_job_as_secrets_or_it_is_refused(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str], hub_token: str
) -> None:
    # Issue 36: a `${NAME}` in notify: reached no job, whose preflight exited 2 after the
    # install was paid for.
    text = SPEC + "notify: ['${SLACK_URL}']\n"
    missing = _launch(tmp_path, hub_env, "--namespace", "my-org", text=text)
    assert missing.returncode == 2
    assert "SLACK_URL is not set here" in missing.stderr
    assert hub_server.jobs.requests == []
    url = "https://hooks.slack.com/services/T0/B0/fromtheshell"
    sent = _launch(tmp_path, {**hub_env, "SLACK_URL": url}, "--namespace", "my-org", text=text)
    assert sent.returncode == 0, sent.stderr
    [request] = hub_server.jobs.requests
    assert request["secrets"] == {"HF_TOKEN": hub_token, "SLACK_URL": url}
    assert url not in repr(request["environment"]) + repr(request["command"])


def test_the_engine_example_launches_on_hfs_own_hardware(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    example = (REPO / "specs" / "under-an-engine.yaml").read_text(encoding="utf-8")
    env = {**hub_env, "SLACK_URL": "https://hooks.slack.com/services/T0/B0/x"}
    result = _launch(tmp_path, env, "--namespace", "my-org", text=example)
    assert result.returncode == 0, result.stderr
    [request] = hub_server.jobs.requests
    assert request["flavor"] == "a100-large"
    assert request["environment"]["RUNSPEC_SPEC_YAML"] == example


def test_a_dry_run_submits_nothing_and_lists_the_flavors_hf_jobs_has(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str], hub_token: str
) -> None:
    result = _launch(tmp_path, hub_env, "--namespace", "my-org", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert hub_server.jobs.requests == [] and not hub_server.jobs.jobs
    out = result.stdout
    assert out.startswith("dry run: nothing submitted\n")
    assert "flavor a100x8, timeout 155 min, attempts 2" in out
    assert "exec runspec run runspec-spec.yaml --engine hf-jobs" in out
    # HF's listing, each flavor with its GPUs and its price an hour (HF bills by the minute).
    assert "cpu-basic (no GPU, $0.01/h), a10g-small (1 x A10G, $1.00/h)" in out
    assert "a100x8 (8 x A100, $20.00/h)" in out
    assert hub_token not in out + result.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "runspec", "launch", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "--dry-run" in shown and "resources.gpus'" not in shown
    assert "default: the cheapest whose GPUs are the spec's resources.gpus" in " ".join(
        shown.split()
    )
