"""`runspec export SPEC --to skypilot|dstack`: the file it writes passes the engine's own
validator (each engine in a cached venv of its own, tests/engine_venvs.py), says what the
issue asks of it, carries the spec byte for byte, and holds no token or laptop path."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.engine_venvs import validate, validator_python

REPO = Path(__file__).resolve().parent.parent
INSTALL = "runspec[train] @ git+https://example.org/runspec@v0.1.0"

# A two-node spot run; trailing spaces and a tab in a comment make the YAML writer quote it,
# which must still carry the text exactly.
SPEC = """\
runspec: 1
name: sweep-a.1
dataset:
  hub: {repo: my-org/data, file: d.tar}
  data: d/data.yaml
train:
  model: yolo9-t
  epochs: 50
  batch: 64   \t# 4 per GPU
resources:
  gpus: "H100:8"
  nodes: 2
  spot: true
  disk: 200GB
push:
  hub: {repo: my-org/run}
budget:
  wall_clock: 6h
  overrun: 30m
finish:
  action: destroy
"""


def _export(spec: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runspec", "export", str(spec), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
        env={
            "PATH": "/usr/bin:/bin",
            "HF_TOKEN": "hf_secretvalue0123456789",
            "HOME": "/tmp",
            "RUNSPEC_INSTALL": INSTALL,
        },
    )


def _written(tmp_path: Path, engine: str, text: str = SPEC, *argv: str) -> tuple[Path, Any]:
    spec = tmp_path / "laptop-folder" / "spec.yaml"
    spec.parent.mkdir(exist_ok=True)
    spec.write_text(text, encoding="utf-8")
    out = tmp_path / f"{engine}.yaml"
    result = _export(spec, "--to", engine, "-o", str(out), *argv)
    assert result.returncode == 0, result.stderr
    return out, yaml.safe_load(out.read_text(encoding="utf-8"))


def _no_secrets_or_paths(out: Path, tmp_path: Path) -> None:
    text = out.read_text(encoding="utf-8")
    assert "hf_secretvalue" not in text
    assert str(tmp_path) not in text and "laptop-folder" not in text


def _carried(text: str) -> None:
    """The spec inside the job is the file's own bytes: the provenance's sha256 matches."""
    digest = hashlib.sha256(SPEC.encode()).hexdigest()
    assert hashlib.sha256(text.encode()).hexdigest() == digest


def test_skypilot_task_passes_skypilot_and_asks_what_the_issue_says(tmp_path: Path) -> None:
    out, task = _written(tmp_path, "skypilot")
    checked = validate("skypilot", out)
    assert checked.returncode == 0, checked.stderr[-3000:]
    # The engine reads the spec it carries as the file's own bytes.
    assert checked.stdout.split() == ["ok", "2", hashlib.sha256(SPEC.encode()).hexdigest()]
    resources = task["resources"]
    assert task["num_nodes"] == 2
    assert resources["accelerators"] == "H100:8"
    assert resources["use_spot"] is True
    assert resources["disk_size"] == 200
    assert resources["autostop"]["down"] is True
    assert resources["job_recovery"] == {"max_restarts_on_errors": 0, "recover_on_exit_codes": [75]}
    assert task["secrets"] == {"HF_TOKEN": None}
    assert task["setup"] == f"pip install --quiet '{INSTALL}'\n"
    assert "exec runspec run runspec-spec.yaml --engine skypilot" in task["run"]
    _carried(task["envs"]["RUNSPEC_SPEC_YAML"])
    _no_secrets_or_paths(out, tmp_path)


def test_dstack_task_passes_dstack_and_covers_budget_and_final_push(tmp_path: Path) -> None:
    out, task = _written(tmp_path, "dstack")
    checked = validate("dstack", out)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert checked.stdout.split() == ["ok", "2", hashlib.sha256(SPEC.encode()).hexdigest()]
    assert task["type"] == "task" and task["nodes"] == 2
    assert task["name"] == "sweep-a-1"  # dstack's run names take no dot
    # dstack's containers get 64 MiB of /dev/shm unless asked (its ResourcesSpec.shm_size):
    # DataLoader workers and NCCL's SHM transport fail there. 2 GB a GPU, 8 GB at least.
    assert task["resources"] == {"gpu": "H100:8", "disk": "200GB", "shm_size": "16GB"}
    assert task["spot_policy"] == "spot"
    # The cap comes after the install (15m), the whole wall_clock and the overrun, where the
    # final push runs: dstack's runner kills 10 s after max_duration's SIGINT
    # (runner/internal/runner/executor/executor.go, killDelay), whatever stop_duration says.
    assert task["max_duration"] == "405m"
    assert task["stop_duration"] == "30m"
    assert task["idle_duration"] == "0s"
    assert task["stop_criteria"] == "master-done"
    # Never `error`: every non-zero exit is `error` to dstack, and its `duration` counts from
    # the last error (dstackai/dstack src/dstack/_internal/server/background/pipeline_tasks/
    # runs/active.py, _should_retry_job; core/models/profiles.py, ProfileRetry.duration), so a
    # failure that recurs (a failed install, exit 2) would buy machines without end.
    assert task["retry"] == {"on_events": ["interruption", "no-capacity"], "duration": "375m"}
    assert task["env"]["HF_TOKEN"] == "${{ secrets.hf_token }}"
    assert task["commands"][-1] == "exec runspec run runspec-spec.yaml --engine dstack"
    _carried(task["env"]["RUNSPEC_SPEC_YAML"])
    _no_secrets_or_paths(out, tmp_path)


def test_dstack_runs_the_spec_byte_for_byte_whatever_dollars_it_holds(tmp_path: Path) -> None:
    # dstack's server turns `$$` into `$` and reads `${{ ... }}` in every env value
    # (dstackai/dstack src/dstack/_internal/utils/interpolator.py, VariablesInterpolator, called
    # on each env value by interpolate_job_spec_secrets): the validator applies it, as the
    # server does, before it hashes the spec the job would get.
    text = SPEC.replace(
        "name: sweep-a.1\n",
        "name: sweep-a.1\ndescription: 'costs $$5 an hour, $HOME, ${{ not.dstacks }} $'\n",
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    out = tmp_path / "dstack.yaml"
    result = _export(spec, "--to", "dstack", "-o", str(out))
    assert result.returncode == 0, result.stderr
    checked = validate("dstack", out)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert checked.stdout.split()[2] == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("infra", ["runpod", "aws", None])
def test_a_stopped_machine_is_refused_on_every_cloud_under_skypilot(
    tmp_path: Path, infra: str | None
) -> None:
    # A managed job's controller terminates its cluster when the job ends, on every cloud
    # (sky/jobs/controller.py, task_cleanup -> managed_job_utils.terminate_cluster): autostop's
    # `down: false` never keeps it (issue 36 found the RunPod/Lambda-only refusal misleading).
    keep = SPEC.replace("action: destroy", "action: stop")
    spec = tmp_path / "spec.yaml"
    spec.write_text(keep, encoding="utf-8")
    refused = _export(spec, "--to", "skypilot", *(["--infra", infra] if infra else []))
    assert refused.returncode == 2
    assert "a managed job's cluster is terminated when the job ends" in refused.stderr
    assert refused.stdout == ""


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (("push:\n  hub: {repo: my-org/run}\n", ""), "push.hub is needed"),
        (('  gpus: "H100:8"\n', ""), "resources.gpus is needed"),
        (
            (
                "  hub: {repo: my-org/data, file: d.tar}\n  data: d/data.yaml\n",
                "  path: /root/data/d/data.yaml\n",
            ),
            "dataset.path /root/data/d/data.yaml is a path on one machine",
        ),
    ],
)
def test_what_no_engine_can_run_is_refused_with_its_reason(
    tmp_path: Path, change: tuple[str, str], said: str
) -> None:
    text = SPEC.replace(*change).replace("action: destroy", "action: none")
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    for engine in ("skypilot", "dstack"):
        result = _export(spec, "--to", engine)
        assert result.returncode == 2, result.stderr
        assert said in result.stderr
        assert result.stdout == ""


def test_without_output_the_task_goes_to_stdout_and_the_next_step_to_stderr(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("  nodes: 2\n", "").replace("64", "8"), encoding="utf-8")
    result = _export(spec, "--to", "dstack")
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["type"] == "task"
    assert "dstack apply -f" in result.stderr


def test_json_holds_the_task_and_the_next_step(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    result = _export(spec, "--to", "skypilot", "--json")
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert data["task"]["num_nodes"] == 2
    assert data["launch"] == 'HF_TOKEN="$(hf auth token)" sky jobs launch FILE --secret HF_TOKEN'


@pytest.mark.parametrize("install", ["runspec[train]==0.1.0", "runspec", ""])
def test_runspec_comes_only_from_a_direct_reference_never_the_pypi_name(
    tmp_path: Path, install: str
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    result = _export(spec, "--to", "skypilot", "--install", install)
    assert result.returncode == 2
    assert "direct reference" in result.stderr
    assert result.stdout == ""


def test_an_invalid_spec_is_reported_as_validate_reports_it(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("batch: 64", "batch: 36"), encoding="utf-8")
    result = _export(spec, "--to", "skypilot")
    assert result.returncode == 2
    assert "/train/batch: batch 36 does not divide evenly across 16 GPUs on 2 nodes" in (
        result.stderr
    )


NOTIFIED = SPEC + "notify:\n  - '${SLACK_URL}'\n  - 'tgram://${TG_BOT}/-100123'\n"
PRIVATE = "runspec[train] @ git+https://${GH_TOKEN}@github.com/me/runspec@v0.1.0"


@pytest.mark.parametrize("engine", ["skypilot", "dstack"])
def test_every_secret_the_spec_and_the_install_name_travels_as_a_secret(
    tmp_path: Path, engine: str
) -> None:
    # Issue 36: `${NAME}` in notify: reached no engine's job, whose preflight then exited 2
    # after a paid install; nor did a token in a private repository's install URL.
    out, task = _written(tmp_path, engine, NOTIFIED, "--install", PRIVATE)
    checked = validate(engine, out)
    assert checked.returncode == 0, checked.stderr[-3000:]
    names = ["HF_TOKEN", "SLACK_URL", "TG_BOT", "GH_TOKEN"]
    if engine == "skypilot":
        assert task["secrets"] == dict.fromkeys(names)
        install = task["setup"]
    else:
        env = task["env"]
        assert {n: env[n] for n in names[1:]} == {n: "${{ secrets." + n + " }}" for n in names[1:]}
        install = task["commands"][0]
    assert "ghp_" not in out.read_text(encoding="utf-8")
    # The shell on the engine's machine puts the token in the URL, and only there.
    shown = subprocess.run(
        ["bash", "-c", install.replace("pip install --quiet", "printf %s", 1)],
        capture_output=True,
        text=True,
        check=True,
        env={"GH_TOKEN": "ghp_fromthesecret"},
    ).stdout
    assert shown == PRIVATE.replace("${GH_TOKEN}", "ghp_fromthesecret")


def test_the_launch_hint_names_every_secret(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(NOTIFIED, encoding="utf-8")
    result = _export(spec, "--to", "skypilot", "--json")
    assert json.loads(result.stdout)["launch"] == (
        'HF_TOKEN="$(hf auth token)" sky jobs launch FILE --secret HF_TOKEN --secret SLACK_URL '
        "--secret TG_BOT"
    )
    result = _export(spec, "--to", "dstack", "-o", str(tmp_path / "task.yml"), "--json")
    hint = json.loads(result.stdout)["launch"]
    assert "dstack secret set SLACK_URL <value>" in hint and "dstack secret set TG_BOT" in hint


ENGINE_EXAMPLE = REPO / "specs" / "under-an-engine.yaml"


@pytest.mark.parametrize("engine", ["skypilot", "dstack"])
def test_the_engine_example_exports_and_passes_the_engines_own_check(
    tmp_path: Path, engine: str
) -> None:
    text = ENGINE_EXAMPLE.read_text(encoding="utf-8")
    out = tmp_path / f"{engine}.yaml"
    result = _export(ENGINE_EXAMPLE, "--to", engine, "-o", str(out))
    assert result.returncode == 0, result.stderr
    checked = validate(engine, out)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert checked.stdout.split() == ["ok", "1", hashlib.sha256(text.encode()).hexdigest()]


@pytest.mark.parametrize(
    "extra",
    [
        "env:\n  HF_HOME: /workspace/hf\n",
        "output:\n  project: /workspace/runs\n",
    ],
)
def test_a_containers_volume_path_is_refused_on_a_skypilot_vm(tmp_path: Path, extra: str) -> None:
    # /workspace is the volume RunPod and vast.ai mount in their containers; on a cloud VM
    # SkyPilot's job runs as the image's user (ubuntu on AWS), which cannot make it, and the
    # run would fail after the install was paid for.
    spec = tmp_path / "spec.yaml"
    # One node: RunPod runs no job across nodes under SkyPilot.
    one_node = SPEC.replace("  nodes: 2\n", "").replace("batch: 64", "batch: 8")
    spec.write_text(one_node + extra, encoding="utf-8")
    refused = _export(spec, "--to", "skypilot", "--infra", "aws")
    assert refused.returncode == 2
    assert "/workspace" in refused.stderr and "a container's volume" in refused.stderr
    assert refused.stdout == ""
    kept = _export(spec, "--to", "skypilot", "--infra", "runpod")
    assert kept.returncode == 0, kept.stderr


def test_the_skypilot_hint_works_for_a_user_logged_in_with_hf_auth_login_only(
    tmp_path: Path,
) -> None:
    # `sky jobs launch --secret HF_TOKEN` reads HF_TOKEN from the shell and refuses when it is
    # unset (sky/client/cli/flags.py, _parse_secret_var); `hf auth login` sets no variable, it
    # stores the token under HF_HOME. The hint is run as given, with a `sky` whose --secret is
    # read by SkyPilot's own _parse_secret_var, and the real `hf` of this venv.
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    hint = json.loads(_export(spec, "--to", "skypilot", "--json").stdout)["launch"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sky = bin_dir / "sky"
    sky.write_text(
        f"#!{validator_python('skypilot')}\n"
        "import sys\n"
        "from sky.client.cli.flags import _parse_secret_var\n"
        "print(_parse_secret_var(sys.argv[sys.argv.index('--secret') + 1])[1])\n"
    )
    sky.chmod(0o755)
    hf_home = tmp_path / "hf-home"
    hf_home.mkdir()
    (hf_home / "token").write_text("hf_storedbyhfauthlogin0123")
    venv_bin = Path(sys.executable).parent
    result = subprocess.run(
        ["bash", "-c", hint],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": f"{bin_dir}:{venv_bin}:/usr/bin:/bin", "HF_HOME": str(hf_home)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "hf_storedbyhfauthlogin0123"


@pytest.mark.parametrize(
    ("infra", "said"),
    [
        ("lambda", "lambda rents no spot machines under SkyPilot"),
        ("kubernetes", "kubernetes rents no spot machines under SkyPilot"),
        ("runpod", "runpod runs no job across nodes under SkyPilot"),
        ("vast/us", "vast runs no job across nodes under SkyPilot"),
    ],
)
def test_spot_or_nodes_on_a_cloud_that_has_none_is_refused(
    tmp_path: Path, infra: str, said: str
) -> None:
    # SPEC asks for 2 spot nodes; SkyPilot 0.14.1's clouds say what they lack in
    # _CLOUD_UNSUPPORTED_FEATURES (sky/clouds/lambda_cloud.py, kubernetes.py: SPOT_INSTANCE;
    # runpod.py, vast.py: MULTI_NODE).
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    refused = _export(spec, "--to", "skypilot", "--infra", infra)
    assert refused.returncode == 2
    assert said in refused.stderr
    assert refused.stdout == ""


# dstack's fleet model (core/models/fleets.py): "Only instances above `nodes.min` are
# terminated, so a fleet with a fixed `nodes: N` keeps its instances", and a fleet's default
# idle_duration is 3 days; a task's own idle_duration does not reach a fleet it reuses.
FLEET_CHECK = (
    "import sys, yaml\n"
    "from dstack._internal.core.models.configurations import parse_apply_configuration\n"
    "fleet = parse_apply_configuration(yaml.safe_load(open(sys.argv[1])))\n"
    "print(fleet.type, fleet.name, fleet.nodes.min, fleet.nodes.max, fleet.placement.value,"
    " fleet.idle_duration)\n"
)


def test_a_dstack_run_across_nodes_brings_a_fleet_that_ends_with_it(tmp_path: Path) -> None:
    out, task = _written(tmp_path, "dstack")
    fleet_file = tmp_path / "dstack.fleet.yaml"
    fleet = yaml.safe_load(fleet_file.read_text(encoding="utf-8"))
    assert task["fleets"] == [fleet["name"]]
    checked = subprocess.run(
        [str(validator_python("dstack")), "-c", FLEET_CHECK, str(fleet_file)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr[-3000:]
    # No instance is kept: min 0, up to the run's nodes, each ended as soon as it is idle.
    assert checked.stdout.split() == ["fleet", "sweep-a-1-fleet", "0", "2", "cluster", "0"]
    assert fleet["resources"] == task["resources"]
    hint = json.loads(
        _export(
            out.parent / "laptop-folder" / "spec.yaml", "--to", "dstack", "-o", str(out), "--json"
        ).stdout
    )["launch"]
    assert f"dstack apply -f {fleet_file}; dstack apply -f {out} " in hint
    assert hint.endswith("(when it is done: dstack fleet delete sweep-a-1-fleet)")
    refused = _export(out.parent / "laptop-folder" / "spec.yaml", "--to", "dstack")
    assert refused.returncode == 2 and "-o FILE" in refused.stderr
