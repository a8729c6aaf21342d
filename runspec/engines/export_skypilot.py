"""A spec as a SkyPilot managed job (`HF_TOKEN="$(hf auth token)" sky jobs launch FILE
--secret HF_TOKEN`).

SkyPilot restarts a job from scratch on a fresh machine when it exits with a code in
`recover_on_exit_codes`: runspec exits 75 for "give me a fresh machine" (a failed GPU, a
preemption) and resumes from its Hub record there; any other failure stays failed
(`max_restarts_on_errors: 0`: a bad spec must not be paid for twice). `autostop` with
`down: true` is the engine-side failsafe: an idle machine is torn down, never left billing.
A managed job's cluster is terminated when the job ends, whatever autostop says
(sky/jobs/controller.py), so `finish: stop` is refused on every cloud.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from runspec.engines.task import (
    SPEC_VARIABLE,
    TOKEN_VARIABLE,
    EngineMisfit,
    JobPlan,
    misfits,
)
from runspec.spec.envpaths import is_path_valued
from runspec.spec.model import FinishAction, Spec

RETRY_EXIT_CODE = 75
# SkyPilot tears an idle machine down after this long; runspec's own end comes first.
IDLE_MINUTES = 10
# Where SkyPilot's job runs in a container as root: RunPod and vast.ai mount their volume at
# /workspace there. Every other cloud gives a VM whose job runs as the image's user (ubuntu on
# AWS and Lambda, gcpuser on GCP), which cannot make a folder at /.
CONTAINER_CLOUDS = frozenset({"runpod", "vast", "kubernetes", "k8s"})
CONTAINER_ONLY = ("/workspace",)
# What each cloud lacks, from its `_CLOUD_UNSUPPORTED_FEATURES` in SkyPilot 0.14.1
# (sky/clouds/*.py: SPOT_INSTANCE, MULTI_NODE), by its name in `infra:`.
NO_SPOT = frozenset(
    {"cudo", "do", "fluidstack", "hyperbolic", "kubernetes", "k8s", "lambda", "paperspace"}
    | {"scp", "seeweb", "shadeform", "slurm", "vsphere", "yotta"}
)
NO_MULTI_NODE = frozenset(
    {"hyperbolic", "primeintellect", "runpod", "seeweb", "shadeform", "vast", "verda"}
    | {"vsphere", "yotta"}
)


def _container_paths(spec: Spec) -> list[str]:
    """ "FIELD PATH" for each folder the spec names in a container-only place."""
    named = [
        ("output.project", spec.output.project),
        ("dataset.extract_to", spec.dataset.extract_to),
        ("push.dir", None if spec.push is None else spec.push.dir),
        *((f"env.{name}", value) for name, value in spec.env.items() if is_path_valued(name)),
    ]
    found = []
    for field, value in named:
        text = None if value is None else str(value)
        if text and any(text == p or text.startswith(p + "/") for p in CONTAINER_ONLY):
            found.append(f"{field} {text}")
    return found


def _infra_cloud(infra: str | None) -> str | None:
    return None if infra is None else infra.split("/", 1)[0].lower()


def skypilot_task(plan: JobPlan, infra: str | None = None) -> dict[str, Any]:
    """The task as SkyPilot's YAML holds it. Raises EngineMisfit for what SkyPilot's own
    validator lets through."""
    spec = plan.spec
    reasons = misfits(spec)
    cloud = _infra_cloud(infra)
    if spec.finish.action == FinishAction.STOP:
        # sky/jobs/controller.py: task_cleanup -> managed_job_utils.terminate_cluster, on
        # every cloud; SkyPilot's validator takes `down: false` all the same.
        reasons.append(
            "finish action stop keeps a stopped machine, which SkyPilot never does: a "
            "managed job's cluster is terminated when the job ends, on every cloud; use "
            "finish action destroy (or none)"
        )
    if spec.resources.spot and cloud in NO_SPOT:
        reasons.append(
            f"{cloud} rents no spot machines under SkyPilot: set resources.spot false, or "
            "another infra"
        )
    if spec.resources.nodes > 1 and cloud in NO_MULTI_NODE:
        reasons.append(
            f"{cloud} runs no job across nodes under SkyPilot: set resources.nodes 1, or "
            "another infra"
        )
    if cloud not in CONTAINER_CLOUDS:
        reasons += [
            f"{where} is a container's volume (RunPod's, vast.ai's): on a cloud VM the job "
            "runs as the image's user, who cannot make it; use a folder under ~ (e.g. "
            "~/.cache/hf) or a relative one, or --infra runpod"
            for where in _container_paths(spec)
        ]
    if reasons:
        raise EngineMisfit("SkyPilot", reasons)
    resources: dict[str, Any] = {}
    if infra:
        resources["infra"] = infra
    if spec.resources.gpus:
        resources["accelerators"] = spec.resources.gpus
    resources["use_spot"] = spec.resources.spot
    if spec.resources.disk is not None:
        resources["disk_size"] = math.ceil(spec.resources.disk / 1e9)  # SkyPilot's GB
    resources["autostop"] = {"idle_minutes": IDLE_MINUTES, "down": True}
    resources["job_recovery"] = {
        "max_restarts_on_errors": 0,
        "recover_on_exit_codes": [RETRY_EXIT_CODE],
    }
    return {
        "name": spec.name,
        "num_nodes": spec.resources.nodes,
        "resources": resources,
        "envs": {SPEC_VARIABLE: spec.text},
        # No value: `sky jobs launch --secret HF_TOKEN` reads it from the launching shell,
        # and SkyPilot keeps it out of its logs and its dashboard. So for each `${NAME}` of
        # the spec's notify: and of the install URL.
        "secrets": dict.fromkeys(plan.secret_names()),
        "setup": plan.install_line() + "\n",
        "run": "\n".join(plan.run_lines("skypilot")) + "\n",
    }


# `--secret HF_TOKEN` takes the value from the shell and refuses when it is unset
# (sky/client/cli/flags.py, _parse_secret_var); `hf auth login` sets no variable. `hf auth
# token` prints HF_TOKEN when set, else the stored login: the hint works for both.
TOKEN_FROM_LOGIN = f'{TOKEN_VARIABLE}="$(hf auth token)"'


def launch_hint(path: str, secrets: Sequence[str] = (TOKEN_VARIABLE,)) -> str:
    given = " ".join(f"--secret {name}" for name in secrets)
    return f"{TOKEN_FROM_LOGIN} sky jobs launch {path} {given}"
