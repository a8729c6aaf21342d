"""runspec with the lowest huggingface_hub its pin allows (tests/client_venv.py): each call it
makes with a keyword a newer client brought (run_job's attempts, create_scheduled_job's name)
works there, against the local Hub's Jobs stand-ins, through the real commands."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.client_venv import REPO, lowest_client_python
from tests.hubscheduled import scheduled_jobs
from tests.hubserver import HubServer
from tests.test_launch_hfjobs import INSTALL, SPEC


def _runspec(python: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "runspec", *argv],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
        check=False,
        env={**os.environ, **env, "PYTHONPATH": str(REPO), "RUNSPEC_INSTALL": INSTALL},
    )


def test_launch_and_the_watchers_schedule_work_with_the_lowest_client_the_pin_allows(
    tmp_path: Path, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    python = lowest_client_python()
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC, encoding="utf-8")

    launched = _runspec(
        python, hub_env, "launch", str(spec), "--on", "hf-jobs", "--namespace", "my-org"
    )
    assert launched.returncode == 0, launched.stderr
    [request] = hub_server.jobs.requests
    assert request["attempts"] == 2 and request["flavor"] == "a100x8"

    keyed = {**hub_env, "RUNSPEC_WATCH_KEY": "k" * 32}  # the job proves leases with it
    scheduled = _runspec(python, keyed, "watch", "--install", "hf-jobs", "myorg")
    assert scheduled.returncode == 0, scheduled.stderr
    [job] = scheduled_jobs(hub_server)
    assert job["namespace"] == "myorg"
    assert job["jobSpec"]["labels"]["name"] == "runspec-watch-myorg"  # create_scheduled_job(name=)
