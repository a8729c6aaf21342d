"""`runspec watch --install hf-jobs ORG`: the watcher as an HF scheduled job, every 10 minutes.

The job runs `runspec watch --once ORG` on the cheapest CPU flavor (cpu-basic: 2 vCPU, billed
$0.000167 a minute in huggingface_hub's own table), with the Hub token and every provider key
set in this environment as job secrets, never as plain environment. Its cost: 144 passes a day,
each billed about 2 minutes (the image's pip install and one pass), so about $0.05 a day.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from runspec import __version__
from runspec.errors import RunspecError
from runspec.providers.detect import PROVIDERS
from runspec.watch.lease import _endpoint, _one_line

FLAVOR = "cpu-basic"  # huggingface_hub's JobHardware.CPU_BASIC, the cheapest
SCHEDULE = "*/10 * * * *"
IMAGE = "python:3.12-slim"
USD_PER_MINUTE = 0.000167  # cpu-basic, as huggingface_hub's JobHardwareInfo lists it
MINUTES_PER_PASS = 2.0
USD_PER_DAY = 24 * 6 * MINUTES_PER_PASS * USD_PER_MINUTE


def secret_names() -> list[str]:
    """Every key a watcher may need, in the order the job gets them."""
    names = ["HF_TOKEN", "VAST_API_KEY"]
    for cls in PROVIDERS.values():
        names += [n for n in cls.secret_env if n not in names]
    return names


def install_hf_job(org: str, notify: Sequence[str]) -> dict[str, Any]:
    from huggingface_hub import HfApi

    secrets = {n: v for n in secret_names() if (v := os.environ.get(n))}
    if "HF_TOKEN" not in secrets:
        raise RunspecError(
            "--install hf-jobs needs HF_TOKEN here: the job reads the leases with it"
        )
    package = os.environ.get("RUNSPEC_PIP", f"runspec=={__version__}")
    watch = ["runspec", "watch", "--once", org, *[f"--notify={url}" for url in notify]]
    command = ["sh", "-c", 'pip install -q "$0" && exec "$@"', package, *watch]
    try:
        job = HfApi(endpoint=_endpoint()).create_scheduled_job(
            image=IMAGE, command=command, schedule=SCHEDULE, flavor=FLAVOR, secrets=secrets,
            namespace=org, concurrency=False, name=f"runspec-watch-{org}",
        )  # fmt: skip
    except Exception as exc:  # the Hub's refusal, said in one line
        raise RunspecError(f"cannot create the scheduled job in {org}: {_one_line(exc)}") from exc
    return {
        "id": job.id, "schedule": SCHEDULE, "flavor": FLAVOR, "secrets": sorted(secrets),
        "usd_per_day": round(USD_PER_DAY, 3),
    }  # fmt: skip
