"""`finish.provider: auto`: which provider this machine belongs to, without touching the network.

Marketplace containers announce themselves in their environment (vast.ai: CONTAINER_API_KEY or
VAST_CONTAINERLABEL; RunPod: RUNPOD_POD_ID), also in PID 1's when a service lost it; Lambda has no
marker, so its instance id configured for runspec names it; clouds name themselves in the DMI
tables (/sys/class/dmi/id: "Amazon EC2", "Google Compute Engine", "Hetzner"), which containers
see too. Nothing is probed over the network: a metadata address that does not answer would cost
seconds per guess, and a wrong guess would send a destroy to the wrong API.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from runspec.clock import SYSTEM, Clock
from runspec.providers.aws import AWS
from runspec.providers.base import Provider, ProviderError, env_or_file
from runspec.providers.gcp import GCP
from runspec.providers.hetzner import Hetzner
from runspec.providers.lambda_cloud import LambdaCloud
from runspec.providers.runpod import RunPod
from runspec.providers.vast import Vast

PROVIDERS: dict[str, type[Provider]] = {
    "vast": Vast,
    "runpod": RunPod,
    "lambda": LambdaCloud,
    "aws": AWS,
    "gcp": GCP,
    "hetzner": Hetzner,
}

DMI_FILES = ("sys_vendor", "product_name", "bios_vendor", "board_vendor")
DMI_MARKERS = (("amazon", "aws"), ("google", "gcp"), ("hetzner", "hetzner"))


def detect(env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """(provider name, how it was recognised), or None."""
    env = dict(os.environ if env is None else env)
    proc = env.get("RUNSPEC_PROC_ENVIRON", "/proc/1/environ")
    for var in ("CONTAINER_API_KEY", "VAST_CONTAINERLABEL"):
        if env_or_file(env, var, proc):
            return "vast", f"{var} is set"
    if env_or_file(env, "RUNPOD_POD_ID", proc):
        return "runpod", "RUNPOD_POD_ID is set"
    for var in ("RUNSPEC_LAMBDA_INSTANCE_ID", "LAMBDA_INSTANCE_ID"):
        if env.get(var):
            return "lambda", f"{var} is set"
    dmi = Path(env.get("RUNSPEC_DMI_DIR", "/sys/class/dmi/id"))
    for name in DMI_FILES:
        try:
            text = (dmi / name).read_text().strip().lower()
        except OSError:
            continue
        for marker, provider in DMI_MARKERS:
            if marker in text:
                return provider, f"DMI {name} is {text!r}"
    return None


def get_provider(
    name: str, env: Mapping[str, str] | None = None, *, clock: Clock = SYSTEM, **kwargs: float
) -> tuple[Provider, str]:
    """The adapter for `finish.provider` (auto: detected), and how it was chosen."""
    env = dict(os.environ if env is None else env)
    how = "finish.provider"
    if name == "auto":
        found = detect(env)
        if found is None:
            raise ProviderError(
                "finish.provider is auto but this machine does not look like vast.ai, RunPod, "
                "Lambda, AWS, GCP or Hetzner; name the provider in the spec"
            )
        name, how = found
    cls = PROVIDERS.get(name)
    if cls is None:
        raise ProviderError(f"unknown provider {name!r} (one of {', '.join(PROVIDERS)})")
    return cls(env, clock=clock, **kwargs), how
