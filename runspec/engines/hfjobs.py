"""A spec as a Hugging Face Jobs request (`HfApi.run_job`): HF's own GPUs, billed per minute.

HF Jobs kills a job at its timeout, 30 minutes unless asked: the request's timeout is
setup + wall_clock + overrun, so runspec's own deadline and its verified final push always come
first. The Hub token goes as a job secret (encrypted by HF, an environment variable in the
job); the job's `environment` is shown in its description, so it carries only the spec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from runspec.engines.task import (
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


@dataclass(frozen=True)
class Hardware:
    """One flavor of the Jobs hardware listing, as runspec needs it."""

    name: str
    gpu_model: str | None = None
    gpu_count: int = 0
    disk_bytes: int | None = None


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


def hardware_from(listing: list[Any]) -> list[Hardware]:
    """The client's JobHardwareInfo list as Hardware."""
    found = []
    for item in listing:
        accelerator = getattr(item, "accelerator", None)
        count = 0
        if accelerator is not None:
            digits = re.match(r"\d+", str(getattr(accelerator, "quantity", "1")))
            count = int(digits.group()) if digits else 1
        size = _SIZE.search(str(getattr(item, "ephemeral_storage", "")))
        disk = None
        if size:
            disk = int(float(size.group(1)) * (1e12 if size.group(2).upper() == "TB" else 1e9))
        model = None if accelerator is None else str(getattr(accelerator, "model", ""))
        found.append(Hardware(str(item.name), model, count, disk))
    return found


def _matches(spec: Spec, hw: Hardware) -> bool:
    asked = spec.resources
    if asked.gpu_name is None:
        return hw.gpu_count == 0
    model = (hw.gpu_model or "").lower().replace(" ", "-")
    return model == asked.gpu_name.lower() and hw.gpu_count == asked.gpus_per_node


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
            raise EngineMisfit(
                "HF Jobs",
                [
                    f"no flavor has {spec.resources.gpus or 'no GPU'}: choose one with "
                    "--flavor (hf jobs hardware lists them) and set resources.gpus to match",
                ],
            )
        # The cheapest comes first in HF's listing; the first that fits.
        hw = fits[0]
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


def job_request(
    plan: JobPlan,
    token: str | None,
    flavor: str,
    image: str = DEFAULT_IMAGE,
    attempts: int = DEFAULT_ATTEMPTS,
) -> JobRequest:
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
    if reasons:
        raise EngineMisfit("HF Jobs", reasons)
    assert token is not None
    # HF stores a job's name as a tag, which takes letters, digits, - and _ only.
    label = re.sub(r"[^A-Za-z0-9_-]", "-", spec.name)
    script = " && ".join([plan.install_line(), *plan.run_lines("hf-jobs")])
    return JobRequest(
        image=image,
        command=["bash", "-c", script],
        env={SPEC_VARIABLE: spec.text},
        secrets={TOKEN_VARIABLE: token},
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
