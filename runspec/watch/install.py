"""`runspec watch --install hf-jobs ORG`: the watcher as an HF scheduled job, every 10 minutes.

The job installs runspec from the direct reference in RUNSPEC_INSTALL (never the name runspec
from PyPI, another project's: runspec.installref) and runs `runspec watch --once ORG` on the
cheapest CPU flavor (cpu-basic: 2 vCPU, billed $0.000167 a minute in huggingface_hub's own
table), with the Hub token, the watch key (RUNSPEC_WATCH_KEY: without it the job would prove
no lease, so it is refused), every provider key set in this environment and the notification
URLs (a webhook URL is a credential) as job secrets, never in its command or environment.
Its cost: 144 passes a day, each billed about 2 minutes (the image's pip install and one
pass), so about $0.05 a day.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from runspec.errors import RunspecError, UsageError
from runspec.hubreach import endpoint_set
from runspec.installref import INSTALL_VARIABLE, install_problem
from runspec.providers.detect import PROVIDERS
from runspec.push.base import one_line
from runspec.watch import NOTIFY_VARIABLE
from runspec.watch.seal import KEY_VARIABLE, key_problem

FLAVOR = "cpu-basic"  # huggingface_hub's JobHardware.CPU_BASIC, the cheapest
SCHEDULE = "*/10 * * * *"
IMAGE = "python:3.12"  # with git, for a git+https reference
USD_PER_MINUTE = 0.000167  # cpu-basic, as huggingface_hub's JobHardwareInfo lists it
MINUTES_PER_PASS = 2.0
USD_PER_DAY = 24 * 6 * MINUTES_PER_PASS * USD_PER_MINUTE


def secret_names() -> list[str]:
    """Every key a watcher may need, in the order the job gets them."""
    names = ["HF_TOKEN", KEY_VARIABLE, "VAST_API_KEY"]
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
    if (problem := key_problem()) is not None:
        raise UsageError(
            f"--install hf-jobs: {problem}: the job would prove no lease and end no box; set "
            f"it here to the watch key in the boxes' /etc/runspec/env"
        )
    package = os.environ.get(INSTALL_VARIABLE)
    if (problem := install_problem(package, INSTALL_VARIABLE)) is not None:
        raise UsageError(problem)
    if notify:
        secrets[NOTIFY_VARIABLE] = " ".join(notify)
    watch = ["runspec", "watch", "--once", org]
    command = ["sh", "-c", 'pip install -q "$0" && exec "$@"', str(package), *watch]
    try:
        job = HfApi(endpoint=endpoint_set()).create_scheduled_job(
            image=IMAGE,
            command=command,
            schedule=SCHEDULE,
            flavor=FLAVOR,
            secrets=secrets,
            namespace=org,
            concurrency=False,
            name=f"runspec-watch-{org}",
        )
    except Exception as exc:  # the Hub's refusal, said in one line
        raise RunspecError(f"cannot create the scheduled job in {org}: {one_line(exc)}") from exc
    return {
        "id": job.id,
        "schedule": SCHEDULE,
        "flavor": FLAVOR,
        "secrets": sorted(secrets),
        "usd_per_day": round(USD_PER_DAY, 3),
    }
