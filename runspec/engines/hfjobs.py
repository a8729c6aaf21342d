"""A spec as a Hugging Face Jobs request (`HfApi.run_job`): HF's own GPUs, billed per minute.

HF Jobs kills a job at its timeout, 30 minutes unless asked: the request's timeout is
setup + wall_clock + overrun, so runspec's own deadline and its verified final push always come
first. The Hub token goes as a job secret (encrypted by HF, an environment variable in the
job); the job's `environment` is shown in its description, so it carries only the spec.
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runspec.engines.task import (
    HF_TASK_ID_VARIABLE,
    SPEC_VARIABLE,
    TOKEN_VARIABLE,
    EngineMisfit,
    JobPlan,
    misfits,
    shell_word,
)
from runspec.spec.model import Spec

# The torch runspec is tested with (the Makefile's pin): the image carries it, so the install
# of runspec[train] keeps it rather than pulling another.
TORCH_VERSION = "2.14.1"
DEFAULT_IMAGE = f"pytorch/pytorch:{TORCH_VERSION}-cuda12.8-cudnn9-runtime"
DEFAULT_ATTEMPTS = 2
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(GB|TB)", re.IGNORECASE)
# A GPU name with its memory in it, as SkyPilot writes them (A100-80GB, H200-141GB).
_MEMORY = re.compile(r"^(?P<model>.+?)[-_ ]?(?P<gb>\d+)\s*GB$", re.IGNORECASE)
# pip installs a git+https reference with git, which pytorch/pytorch's runtime images lack.
_GITHUB_GIT = re.compile(
    r"^(?P<name>[A-Za-z0-9._-]+(?:\[[A-Za-z0-9_,-]+\])?)\s*@\s*git\+https://github\.com/"
    r"(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+?)(?:\.git)?"
    r"(?:@(?P<ref>[A-Za-z0-9._-]+))?(?P<fragment>#\S*)?$"
)


@dataclass(frozen=True)
class Hardware:
    """One flavor of the Jobs hardware listing, as runspec needs it."""

    name: str
    gpu_model: str | None = None
    gpu_count: int = 0
    disk_bytes: int | None = None
    gpu_gb: float | None = None  # each GPU's memory: the listing's vram is the flavor's total
    cost: float | None = None  # micro-dollars a minute; None: not said


@dataclass(frozen=True)
class JobRequest:
    """The keyword arguments of `HfApi.run_job`, worked out from the spec."""

    image: str
    command: list[str]
    env: dict[str, str]
    secrets: dict[str, str] = field(repr=False)  # the token: never printed
    flavor: str
    timeout: int  # seconds
    attempts: int
    name: str
    labels: dict[str, str]

    def as_kwargs(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "command": self.command,
            "env": self.env,
            "secrets": self.secrets,
            "flavor": self.flavor,
            "timeout": self.timeout,
            "attempts": self.attempts,
            "name": self.name,
            "labels": self.labels,
        }


def _bytes(text: str) -> int | None:
    size = _SIZE.search(text)
    if size is None:
        return None
    return int(float(size.group(1)) * (1e12 if size.group(2).upper() == "TB" else 1e9))


def hardware_from(listing: list[Any]) -> list[Hardware]:
    """The client's JobHardwareInfo list as Hardware."""
    found = []
    for item in listing:
        accelerator = getattr(item, "accelerator", None)
        count, model, gpu_gb = 0, None, None
        if accelerator is not None:
            digits = re.match(r"\d+", str(getattr(accelerator, "quantity", "1")))
            count = int(digits.group()) if digits else 1
            model = str(getattr(accelerator, "model", ""))
            vram = _bytes(str(getattr(accelerator, "vram", "")))
            gpu_gb = None if vram is None else vram / 1e9 / max(count, 1)
        disk = _bytes(str(getattr(item, "ephemeral_storage", "")))
        cost = getattr(item, "unit_cost_micro_usd", None)
        price = float(cost) if isinstance(cost, (int, float)) and cost >= 0 else None
        found.append(Hardware(str(item.name), model, count, disk, gpu_gb, price))
    return found


def _key(name: str) -> str:
    """A GPU's name as compared: case, spaces and dashes aside (RTX PRO 6000, rtx-pro-6000)."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _same_gpu(asked: str, hw: Hardware) -> bool:
    """Is the GPU `asked` (SkyPilot's way: A100, A100-80GB) the one this flavor has (HF's
    way: model A100, its memory in vram)?"""
    memory = _MEMORY.match(asked.strip())
    model, gb = (memory["model"], float(memory["gb"])) if memory else (asked, None)
    if hw.gpu_model is None or _key(hw.gpu_model) != _key(model):
        return False
    return gb is None or hw.gpu_gb is None or abs(hw.gpu_gb - gb) < 1


def _matches(spec: Spec, hw: Hardware) -> bool:
    asked = spec.resources
    if asked.gpu_name is None:
        return hw.gpu_count == 0
    return _same_gpu(asked.gpu_name, hw) and hw.gpu_count == asked.gpus_per_node


def _no_fit(spec: Spec, listing: list[Hardware]) -> str:
    """Why no flavor has the GPUs the spec asks for, with what HF has."""
    name = spec.resources.gpu_name
    if name is None:
        return "no flavor without a GPU: choose one with --flavor (hf jobs hardware lists them)"
    counts = sorted({hw.gpu_count for hw in listing if _same_gpu(name, hw)})
    if counts:
        shown = ", ".join(str(c) for c in counts)
        return (
            f"HF Jobs has {name} in flavors of {shown}, not {spec.resources.gpus_per_node}: "
            "set resources.gpus to one of them (and train.batch to match)"
        )
    models: dict[str, list[int]] = {}
    for hw in listing:
        if hw.gpu_model:
            models.setdefault(hw.gpu_model, []).append(hw.gpu_count)
    shown = ", ".join(
        f"{model} ({', '.join(str(c) for c in sorted(set(n)))})" for model, n in models.items()
    )
    return (
        f"HF Jobs has no {name}: its GPUs are {shown}; set resources.gpus to one of them "
        "(hf jobs hardware lists the flavors)"
    )


def choose_flavor(spec: Spec, flavor: str | None, listing: list[Hardware] | None) -> str:
    """The flavor asked for, checked against the listing where it could be read; else the
    one flavor whose GPUs are what resources.gpus asks for."""
    if listing is None:
        if flavor is None:
            raise EngineMisfit(
                "HF Jobs",
                ["the hardware listing could not be read: name the flavor with --flavor"],
            )
        return flavor
    names = {hw.name: hw for hw in listing}
    if flavor is not None:
        hw = names.get(flavor)
        if hw is None:
            known = ", ".join(sorted(names))
            raise EngineMisfit("HF Jobs", [f"no flavor {flavor!r}; HF Jobs has: {known}"])
        if spec.resources.gpu_name is not None and not _matches(spec, hw):
            raise EngineMisfit(
                "HF Jobs",
                [
                    f"flavor {flavor} has {hw.gpu_count} x {hw.gpu_model}, not the "
                    f"resources.gpus {spec.resources.gpus} the spec asks for",
                ],
            )
    else:
        fits = [hw for hw in listing if _matches(spec, hw)]
        if not fits:
            raise EngineMisfit("HF Jobs", [_no_fit(spec, listing)])
        # HF's listing is not sorted by price: the cheapest that fits (unpriced ones last).
        hw = min(fits, key=lambda h: (h.cost is None, h.cost or 0.0, h.name))
    disk = spec.resources.disk
    if disk is not None and hw.disk_bytes is not None and disk > hw.disk_bytes:
        raise EngineMisfit(
            "HF Jobs",
            [
                f"flavor {hw.name} has {hw.disk_bytes // 10**9} GB of disk; resources.disk "
                f"asks for {disk // 10**9} GB"
            ],
        )
    return hw.name


def gitless_install(install: str, image: str) -> str | None:
    """The requirement pip can install on `image`: as given, or for an image without git
    (pytorch/pytorch's runtime ones) a GitHub git+https reference as GitHub's archive of the
    same ref (https://github.com/OWNER/REPO/archive/REF.tar.gz); None when it needs git there
    and has no archive runspec knows."""
    if "git+" not in install or not (
        image.startswith("pytorch/pytorch:") and image.endswith("-runtime")
    ):
        return install
    found = _GITHUB_GIT.match(install.strip())
    if found is None:
        return None
    ref = found["ref"] or "HEAD"
    archive = f"https://github.com/{found['owner']}/{found['repo']}/archive/{ref}.tar.gz"
    return f"{found['name']} @ {archive}{found['fragment'] or ''}"


def job_request(
    plan: JobPlan,
    token: str | None,
    flavor: str,
    image: str = DEFAULT_IMAGE,
    attempts: int = DEFAULT_ATTEMPTS,
    environ: Mapping[str, str] | None = None,
) -> JobRequest:
    """`environ`: where each `${NAME}` of the spec's notify: and of the install URL is read,
    to go to the job as a secret (default: this process's environment)."""
    environ = os.environ if environ is None else environ
    spec = plan.spec
    reasons = misfits(spec)
    if spec.resources.nodes > 1:
        reasons.append(
            "HF Jobs runs one machine per job here: resources.nodes must be 1 (use SkyPilot "
            "or dstack for more: runspec export)"
        )
    if spec.resources.spot:
        reasons.append("HF Jobs rents no spot machines: set resources.spot false")
    if not token:
        reasons.append(
            "no Hub token to give the job: log in (hf auth login) or set HF_TOKEN; it goes "
            "to the job as a secret"
        )
    others = [name for name in plan.secret_names() if name != TOKEN_VARIABLE]
    reasons += [
        f"{name} is not set here: the spec's notify: or the install URL takes it as "
        f"${{{name}}}, and it goes to the job as a secret; export {name}=..."
        for name in others
        if not environ.get(name)
    ]
    install = gitless_install(plan.install, image)
    if install is None:
        reasons.append(
            f"the image {image} has no git, so pip cannot install {plan.install!r}: give "
            "--install an https archive of the repo (GitHub's: https://github.com/ORG/REPO/"
            "archive/REF.tar.gz), or --image one with git (e.g. python:3.12)"
        )
    if reasons:
        raise EngineMisfit("HF Jobs", reasons)
    assert token is not None and install is not None
    plan = dataclasses.replace(plan, install=install)
    # HF stores a job's name as a tag, which takes letters, digits, - and _ only.
    label = re.sub(r"[^A-Za-z0-9_-]", "-", spec.name)
    script = " && ".join([plan.install_line(), *plan.run_lines("hf-jobs")])
    return JobRequest(
        image=image,
        command=["bash", "-c", script],
        # One id per launch, the same for every attempt of the job: the run's identity in its
        # attempt ledger (runspec.run.attemptgate). Launched again, it is a new run.
        env={SPEC_VARIABLE: spec.text, HF_TASK_ID_VARIABLE: f"hf-{secrets.token_hex(8)}"},
        secrets={TOKEN_VARIABLE: token, **{name: environ[name] for name in others}},
        flavor=flavor,
        timeout=plan.cap_seconds,
        attempts=attempts,
        name=label,
        labels={"runspec": label},
    )


def follow_lines(job_id: str, namespace: str, url: str) -> list[str]:
    ref = shell_word(f"{namespace}/{job_id}")
    return [
        f"job {job_id} submitted: {url}",
        f"follow it: hf jobs logs -f {ref}",
        f"its state: hf jobs inspect {ref}; end it: hf jobs cancel {ref}",
    ]
