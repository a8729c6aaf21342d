"""A spec as a dstack task (`dstack apply -f FILE`, after `dstack secret set hf_token ...`).

dstack's `max_duration` sends SIGINT when it is reached and its runner kills 10 s later
(runner/internal/runner/executor/executor.go: `killDelay: 10 * time.Second`, whatever
`stop_duration` says): it is set past runspec's own end, the install time + wall_clock +
overrun, so the final push in the overrun is never cut. Containers get 64 MiB of `/dev/shm`
unless `resources.shm_size` asks for more (core/models/resources.py, ResourcesSpec): PyTorch's
DataLoader workers and NCCL's SHM transport fail there, so the task asks for 2 GB a GPU.
The carried spec's every `$` is doubled (`escaped`): dstack's server un-doubles them, and the
job gets the file byte for byte.

`retry` names `interruption` and `no-capacity` only, never `error`. Every non-zero exit is
`error` to dstack (the runner's exit status becomes CONTAINER_EXITED_WITH_ERROR,
server/background/pipeline_tasks/jobs_running.py; JobTerminationReason.to_retry_event,
core/models/runs.py), 75 and 2 alike, and for `interruption` and `error` the retry `duration`
counts from the last such event, not from the run's start (ProfileRetry.duration,
core/models/profiles.py; _should_retry_job, server/background/pipeline_tasks/runs/active.py:
now - the last provisioned submission's last_processed_at). So a failure that comes back
within `duration` of the one before is retried without end, whatever `duration` says: the
attempt ledger would end each retry at its gate, but only after a paid machine and install, and
an exit before the gate (a failed install, a damaged ledger, a token the Hub refuses) would
never be bounded at all. A 75 (the machine's fault) ends the dstack run; `dstack apply` again
starts a new task. After a preemption the retry waits for a machine for the budget's length
at most; an attempt that gets one past the budget exits 0 at its gate.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from runspec.engines.task import (
    SPEC_VARIABLE,
    TOKEN_VARIABLE,
    EngineMisfit,
    JobPlan,
    duration_text,
    misfits,
)
from runspec.spec.model import FinishAction

SECRET_NAME = "hf_token"
SHM_GB_PER_GPU = 2
SHM_GB_MIN = 8


def run_name(name: str) -> str:
    """The spec's name as dstack's run names take it: a lowercase letter first, then letters,
    digits and dashes, 41 at most."""
    cleaned = re.sub(r"[^a-z0-9-]", "-", name)
    if not cleaned[0].isalpha():
        cleaned = "r-" + cleaned
    return cleaned[:41]


def escaped(value: str) -> str:
    """`value` as an env value dstack's server hands the job unchanged. Its VariablesInterpolator
    (src/dstack/_internal/utils/interpolator.py, run on every env value by
    server/services/jobs/__init__.py's interpolate_job_spec_secrets) turns `$$` into `$` and
    reads `${{ ... }}` as its own variable: with every `$` doubled, each `$` it finds starts a
    `$$`, so it gives back the text byte for byte (the spec's sha256 stays the file's)."""
    return value.replace("$", "$$")


def dstack_task(plan: JobPlan) -> dict[str, Any]:
    """The task as dstack's YAML holds it. Raises EngineMisfit for what dstack's own
    validator lets through."""
    spec = plan.spec
    reasons = misfits(spec)
    if spec.finish.action == FinishAction.STOP:
        reasons.append(
            "finish action stop keeps a stopped machine, which dstack never does (it "
            "terminates its instances): use finish action destroy"
        )
    if reasons:
        raise EngineMisfit("dstack", reasons)
    resources: dict[str, Any] = {}
    if spec.resources.gpus:
        resources["gpu"] = spec.resources.gpus
    if spec.resources.disk is not None:
        resources["disk"] = f"{math.ceil(spec.resources.disk / 1e9)}GB"
    resources["shm_size"] = f"{max(SHM_GB_MIN, SHM_GB_PER_GPU * spec.resources.gpus_per_node)}GB"
    task: dict[str, Any] = {
        "type": "task",
        "name": run_name(spec.name),
        "nodes": spec.resources.nodes,
        "python": "3.11",
        "env": {
            TOKEN_VARIABLE: _secret(SECRET_NAME),
            # Each `${NAME}` of the spec's notify: and of the install URL, from dstack's
            # secret of the same name (`dstack secret set NAME ...`).
            **{name: _secret(name) for name in plan.secret_names() if name != TOKEN_VARIABLE},
            SPEC_VARIABLE: escaped(spec.text),
        },
        "commands": [plan.install_line(), *plan.run_lines("dstack")],
        "spot_policy": "spot" if spec.resources.spot else "on-demand",
        "max_duration": duration_text(plan.cap_seconds),
        "stop_duration": duration_text(spec.budget.overrun),
        "idle_duration": "0s",
        "retry": {
            "on_events": ["interruption", "no-capacity"],
            "duration": duration_text(plan.budget_seconds),
        },
    }
    if resources:
        task["resources"] = resources
    if spec.resources.nodes > 1:
        # The run is done when node 0's runspec says so; the others follow torchrun.
        task["stop_criteria"] = "master-done"
        task["fleets"] = [fleet_name(spec.name)]
    return task


def fleet_name(name: str) -> str:
    return run_name(name)[:35] + "-fleet"


def dstack_fleet(plan: JobPlan) -> dict[str, Any] | None:
    """For a run across nodes, the fleet it runs in (`placement: cluster`), made to end with
    it; None for one node. dstack's fleets keep every instance up to `nodes.min` and end the
    rest after `idle_duration`, 3 days by default (core/models/fleets.py), and a task's own
    idle_duration does not reach a fleet: so `nodes: 0..N` and `idle_duration: 0s`."""
    spec = plan.spec
    if spec.resources.nodes <= 1:
        return None
    task = dstack_task(plan)
    return {
        "type": "fleet",
        "name": fleet_name(spec.name),
        "nodes": f"0..{spec.resources.nodes}",
        "placement": "cluster",
        "idle_duration": "0s",
        "spot_policy": task["spot_policy"],
        "resources": task["resources"],
    }


def _secret(name: str) -> str:
    return "${{ secrets." + name + " }}"


def launch_hint(
    path: str, secrets: Sequence[str] = (TOKEN_VARIABLE,), fleet: tuple[str, str] | None = None
) -> str:
    """`fleet`: (its file, its name) for a run across nodes."""
    others = "".join(f"dstack secret set {n} <value>; " for n in secrets if n != TOKEN_VARIABLE)
    # `hf auth token` prints HF_TOKEN when set, else the login `hf auth login` stored.
    token = f'dstack secret set {SECRET_NAME} "$(hf auth token)"'
    first = f"dstack apply -f {fleet[0]}; " if fleet else ""
    after = f" (when it is done: dstack fleet delete {fleet[1]})" if fleet else ""
    return f"{token}; {others}{first}dstack apply -f {path}{after}"
