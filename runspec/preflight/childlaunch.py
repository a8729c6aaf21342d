"""How the preflight's child starts: behind the trainer's walls, since it runs the same
third-party code (torch, LibreYOLO's loaders and profiler, the dataset's own files).

Where systemd runs and we are root (the daemon, `runspec run` as root), the child is a
transient unit with the trainer's own sandbox (runspec.trainer.trainerunit.sandbox_properties):
no capability, /etc/runspec and the inbox inaccessible, the system read-only, and writable only
the folders its checks probe that the launcher itself can write. A folder the launcher cannot
write stays read-only in the child too, so the writable check still names runspecd's sandbox
and its fix. The Hub token, when a check needs it, goes by a pipe (runspec.trainer.tokenpipe),
never as a property; `RuntimeMaxSec=` ends the unit even if its launcher is gone.

Elsewhere it is a child in a session of its own that walls itself in as it starts
(runspec.secrets.childwalls, called by runspec.preflight.__main__). Either way its environment
holds no provider key, and it runs isolated (`python -I`, runspec's code by path).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from runspec.childpython import isolated
from runspec.dataset.staging import expected_data_yaml
from runspec.secrets.secretenv import child_environ, hub_token, preflight_needs_hub_token
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths
from runspec.trainer.control import TrainJob
from runspec.trainer.trainerunit import (
    sandbox_properties,
    setenv_args,
    systemctl,
    token_pipe,
    writable_paths,
)

SYSTEMD_RUNNING = Path("/run/systemd/system")
UNIT_PREFIX = "runspec-preflight-"
_REAP_S = 10.0  # after the hard kill, for the unit's processes to go


def child_env(spec: Spec, *, with_token: bool = True) -> dict[str, str]:
    """The environment the trainer will have (ours, less every secret, plus the spec's `env`,
    which holds none), with the Hub token only where the checks need it (and `with_token`:
    a unit gets it by a pipe instead)."""
    needs = with_token and preflight_needs_hub_token(spec)
    env = child_environ(os.environ, hub_token=needs)
    env.update({k: str(v) for k, v in spec.env.items()})
    return env


@dataclass
class Child:
    proc: subprocess.Popen[str]
    kill: Callable[[], None]  # the hard kill, of the child and everything it started


def use_unit(accepted: bool) -> bool:
    """A unit for an accepted run's preflight (its spec is in the state folder, which the
    unit sees; a spec file of the caller's own may be in a /tmp the unit does not)."""
    return (
        accepted
        and os.geteuid() == 0
        and SYSTEMD_RUNNING.is_dir()
        and shutil.which("systemd-run") is not None
    )


def _launcher_can_write(folder: Path) -> bool:
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)  # ReadWritePaths= skips a missing one
    return os.access(folder, os.W_OK)


def probed_folders(spec: Spec, paths: RunPaths, job: TrainJob) -> list[Path]:
    """The folders the checks write in: the trainer's, the project folder, push.dir."""
    found = [*writable_paths(job, paths), paths.project.absolute()]
    if spec.push is not None and spec.push.dir is not None:
        found.append(paths.resolve(spec.push.dir).absolute())
    return list(dict.fromkeys(found))


def unit_command(spec: Spec, paths: RunPaths, argv: Sequence[str], timeout: float) -> list[str]:
    job = TrainJob.from_spec(spec, paths, expected_data_yaml(spec, paths))
    writable = [p for p in probed_folders(spec, paths, job) if _launcher_can_write(p)]
    props = sandbox_properties(
        job, paths, needs_token=preflight_needs_hub_token(spec), writable=writable
    )
    unit = f"{UNIT_PREFIX}{job.name}-{secrets.token_hex(4)}.service"
    cmd = ["systemd-run", f"--unit={unit}", "--collect", "--pipe", "--quiet"]
    cmd += [
        # "-": a run folder it cannot make is the writable check's to say, not a unit that
        # fails to start.
        f"--property=WorkingDirectory=-{job.run_dir}",
        f"--property=RuntimeMaxSec={int(timeout + _REAP_S) + 1}s",
        *(f"--property={prop}" for prop in props),
    ]
    return [*cmd, *setenv_args(child_env(spec, with_token=False)), "--", *argv]


def _unit_of(cmd: Sequence[str]) -> str:
    return next(arg.removeprefix("--unit=") for arg in cmd if arg.startswith("--unit="))


def start_child(
    spec: Spec, paths: RunPaths, args: Sequence[str], cwd: Path, timeout: float, accepted: bool
) -> Child:
    """Start `python -m runspec.preflight ARGS`, walled in; stdout and stderr are pipes."""
    argv = isolated(sys.executable, "runspec.preflight", *args)
    if not use_unit(accepted):
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(spec),
            cwd=cwd,
            start_new_session=True,  # its own group: the timeout kills its workers too
        )

        def kill_group() -> None:
            # The group is ours: the child was started just above and has not been reaped.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        return Child(proc, kill_group)
    token = hub_token() if preflight_needs_hub_token(spec) else None
    if token is not None:
        argv = isolated(sys.executable, "runspec.trainer.tokenpipe", *argv)
    cmd = unit_command(spec, paths, argv, timeout)
    stdin = token_pipe(token)
    try:
        runner = subprocess.Popen(
            cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    finally:
        if stdin != subprocess.DEVNULL:
            os.close(stdin)
    unit = _unit_of(cmd)

    def kill_unit() -> None:
        subprocess.run(
            systemctl("kill", "--signal=SIGKILL", "--kill-whom=all", unit),
            capture_output=True,
            timeout=_REAP_S,
            check=False,
        )

    return Child(runner, kill_unit)
