"""The trainer's transient unit: its sandbox, its environment, and the Hub token by a pipe.

The trainer runs third-party code (LibreYOLO, its data loaders, a dataset's own files) as root,
so its unit gets what training needs and no more:

- `UMask=0077`: the run folder, the weights and the logs are the owner's alone.
- `NoNewPrivileges=`, and `ProtectSystem=strict` with writes only to its run folder, its control
  folder, the staged data (LibreYOLO's disk cache writes beside the images), the Hub cache
  (HF_HOME) and the weights cache; read-only homes; a `PrivateTmp=`
  unless the run's own folders are in the shared /tmp.
  The devices stay as they are: the GPUs, and the NVLink or InfiniBand adapters NCCL may use.
- An environment without secrets: the launcher's own, less every secret and systemd's
  per-unit variables (runspec.secrets.secretenv), plus the spec's env. A trainer that fetches a
  model from a Hub repo gets the token through a pipe on its stdin (runspec.trainer.tokenpipe). Not
  as a property: `systemctl show` prints every property to any user, and systemd writes them to
  /run/systemd/transient/. `SetCredential=` is a property too, and `LoadCredential=` reads a
  file (the whole EnvironmentFile, provider keys included) into another file; a pipe leaves the
  token nowhere but in the trainer's memory. A trainer that needs no token does not see the
  stored Hub login file either.

Under `systemd --user` (a launcher that is not root) mount namespaces need user namespaces,
which many machines refuse: there the unit gets the umask and NoNewPrivileges only, and the
home it can write is its user's own.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from runspec.childpython import RUNSPEC_CODE, isolated
from runspec.clock import SYSTEM
from runspec.errors import RunspecError
from runspec.secrets.secretenv import child_environ, hub_token
from runspec.store.offlimits import off_limits
from runspec.store.paths import RunPaths
from runspec.trainer.control import TrainJob
from runspec.trainer.sessionwalls import hf_home, job_needs_hub_token, stored_login

log = logging.getLogger("runspec.trainer.launcher")

POLL = 0.2  # seconds between looks at the unit while it starts
START_TIMEOUT = 30.0  # for systemd-run to report the unit's main pid
SHARED_TMP = (Path("/tmp"), Path("/var/tmp"))
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class LaunchError(RunspecError):
    """The trainer could not be started."""


def unit_name(name: str) -> str:
    return "runspec-train-" + re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".service"


def systemctl(*args: str) -> list[str]:
    user = ["--user"] if os.geteuid() != 0 else []
    return ["systemctl", *user, *args]


# `python -I` (no folder the trainer can write on its import path: neither its working
# directory, nor PYTHONPATH, nor a user site) and then runspec's own code by its explicit path:
# a dataset that planted a `runspec/` package somewhere cannot have it run.
def trainer_env(job: TrainJob, *, with_token: bool) -> dict[str, str]:
    """What the trainer's environment holds, by either route (unit or session)."""
    env = child_environ(os.environ, hub_token=with_token)
    env.update(job.env)  # the spec's env: never secrets (the spec's rules refuse them)
    if not job_needs_hub_token(job):
        # huggingface_hub in the trainer reads no stored login either (it would send it with
        # every download of public weights): its token file is an empty one.
        env["HF_TOKEN_PATH"] = os.devnull
    # A data.yaml's relative `path:` means, to LibreYOLO, this folder first: the dataset's own,
    # as runspec.dataset.datayaml checked it.
    env["LIBREYOLO_DATASETS_DIR"] = str(Path(job.data).parent)
    return env


def _settable(name: str, value: str) -> bool:
    """systemd refuses a whole unit over one assignment it cannot take: a name that is not a
    shell name (a bash function's `BASH_FUNC_f%%`), a control character, undecodable bytes."""
    if not _ENV_NAME.match(name) or _CONTROL.search(value):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def writable_paths(job: TrainJob, paths: RunPaths) -> list[Path]:
    found = [
        job.run_dir,
        Path(job.control_dir),
        paths.data_root,
        Path(job.data).parent,
        hf_home(job),
        Path(job.weights_cache),
    ]
    return list(dict.fromkeys(p.absolute() for p in found))


def _quoted(path: Path) -> str:
    # systemd splits these lists at spaces and reads C-style quotes; "-": a missing path is
    # skipped instead of failing the unit.
    text = "-" + str(path)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def code_in_shared_tmp(*programs: Path) -> list[Path]:
    """The folders of this program (its Python environment, runspec's own code, and the
    environments of `programs`) that lie in the shared /tmp or /var/tmp: a unit's private /tmp
    would hide them, so the unit binds them in, read-only (a checkout cloned into /tmp)."""
    found = [Path(sys.prefix), Path(__file__).parent.parent.parent]  # runspec's own, and its env
    found += [program.parent.parent for program in programs]
    folders = dict.fromkeys(p.absolute() for p in found)
    return [p for p in folders if any(p.is_relative_to(tmp) for tmp in SHARED_TMP)]


def quoted_list(folders: Sequence[Path]) -> str:
    return " ".join(_quoted(p) for p in folders)


# As runspecd.service's walls, less what training needs: the devices (GPUs, the NVLink and
# InfiniBand adapters NCCL may use) stay open, and so does the network (the Hub, NCCL's TCP).
# Uid 0 with no capability at all: no remount of its read-only view, no read of a file that is
# not root's, no signal or ptrace beyond its own processes, no new privileges.
WALLS = (
    "CapabilityBoundingSet=",
    "AmbientCapabilities=",
    "PrivateMounts=yes",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "ProtectClock=yes",
    "ProtectHostname=yes",
    "ProtectProc=invisible",
    "RestrictNamespaces=yes",
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
    "SystemCallFilter=@system-service",
    "SystemCallErrorNumber=EPERM",
    "SystemCallArchitectures=native",
    "RestrictRealtime=yes",
    "RestrictSUIDSGID=yes",
    "LockPersonality=yes",
)


def _bind(path: Path) -> str:
    text = str(path).replace("\\", "\\\\").replace(":", "\\:")  # BindPaths= reads SRC:DST
    return '"-' + text.replace('"', '\\"') + '"'


def others_hidden(paths: RunPaths, writable: Sequence[Path]) -> list[str]:
    """Other runs' job folders and run folders are none of this one's business (their weights,
    their specs): an empty read-only tmpfs over the jobs folder and over the project folder,
    with this run's own folders bound back (its job folder read-only, its writable folders as
    they were). Runs made after this unit started are hidden too. Not over a folder that holds
    runspec's code or its Python (a project folder made above them): that one stays seen."""
    code = [Path(sys.prefix).resolve(), Path(RUNSPEC_CODE), Path(sys.base_prefix).resolve()]
    props = []
    for cover in dict.fromkeys([paths.layout.jobs.absolute(), paths.project.absolute()]):
        if cover in writable or ":" in str(cover):  # a writable folder stays whole
            continue
        if any(c.is_relative_to(cover) for c in code):
            continue
        own = [p for p in writable if p.is_relative_to(cover) and p != cover]
        job = paths.job_dir.absolute()
        read_only = [job] if job.is_relative_to(cover) else []
        props.append("TemporaryFileSystem=" + _quoted(cover).replace('"-', '"', 1)[:-1] + ':ro"')
        if read_only:
            props.append("BindReadOnlyPaths=" + " ".join(_bind(p) for p in read_only))
        if own:
            props.append("BindPaths=" + " ".join(_bind(p) for p in own))
    return props


def sandbox_properties(
    job: TrainJob, paths: RunPaths, *, needs_token: bool, writable: Sequence[Path] | None = None
) -> list[str]:
    """The trainer's walls. The preflight's child gets the same with its own `writable` (the
    folders its checks probe) in place of the trainer's."""
    props = ["UMask=0077", "NoNewPrivileges=yes"]
    if os.geteuid() != 0:
        return props
    writable = writable_paths(job, paths) if writable is None else list(writable)
    # A private /tmp would hide the run's own folders when they lie in the shared one (a state
    # folder made by mktemp, a test's): then the trainer keeps the shared /tmp, writable, for
    # torch's caches and temporary files need one (ProtectSystem=strict alone leaves it
    # read-only: torch's import then fails making /tmp/torchinductor_<user>).
    shared_tmp = any(p.is_relative_to(t) for p in [paths.state, *writable] for t in SHARED_TMP)
    if shared_tmp:
        writable = list(dict.fromkeys([*writable, *SHARED_TMP]))
    props += [
        "ProtectSystem=strict",
        "ReadWritePaths=" + " ".join(_quoted(p) for p in writable),
        "ProtectHome=read-only",
        *WALLS,
        "InaccessiblePaths=" + quoted_list(off_limits(paths.layout)),
        *others_hidden(paths, writable),
    ]
    if not shared_tmp:
        props.append("PrivateTmp=yes")
        code = code_in_shared_tmp()
        if code:
            props.append("BindReadOnlyPaths=" + quoted_list(code))
    if not needs_token:
        props.append("InaccessiblePaths=" + " ".join(_quoted(p) for p in stored_login(job)))
    return props


def systemd_run_command(
    job: TrainJob, paths: RunPaths, argv: Sequence[str], *, needs_token: bool
) -> list[str]:
    cmd = ["systemd-run"] + (["--user"] if os.geteuid() != 0 else [])
    cmd += [
        f"--unit={unit_name(job.name)}",
        "--collect",
        # The unit's stdin, stdout and stderr are ours: the token pipe, and the console log
        # opened for appending. systemd-run then waits for the unit; it is ended once the
        # unit runs, which keeps running on its own descriptors.
        "--pipe",
        "--quiet",
        # Its own run folder: not the weights cache, which every run writes.
        f"--property=WorkingDirectory={job.run_dir}",
        # The trainer's own SIGTERM handler asks for a graceful stop; the whole cgroup (the
        # multi-GPU coordinator and its ranks) is killed only when `systemctl kill` says so.
        "--property=KillMode=mixed",
        "--property=TimeoutStopSec=60",
    ]
    props = sandbox_properties(job, paths, needs_token=needs_token)
    cmd += [f"--property={prop}" for prop in props]
    cmd += setenv_args(trainer_env(job, with_token=False))  # the token, if any, by the pipe
    return [*cmd, "--", *argv]


def setenv_args(env: dict[str, str]) -> list[str]:
    """systemd-run's --setenv= for each variable systemd can take."""
    skipped = sorted(k for k, v in env.items() if not _settable(k, v))
    if skipped:
        log.debug("not passed to the unit (systemd cannot take them): %s", skipped)
    return [f"--setenv={k}={v}" for k, v in sorted(env.items()) if _settable(k, v)]


def token_pipe(token: str | None) -> int:
    """A pipe holding the token for the unit's stdin (runspec.trainer.tokenpipe), or DEVNULL;
    the caller closes a pipe's end once the unit's runner has it."""
    if token is None:
        return subprocess.DEVNULL
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, (token + "\n").encode())  # far below a pipe's buffer
    finally:
        os.close(write_end)
    return read_end


def open_log(path: str) -> BinaryIO:
    """The trainer's console log, for appending; made 0600 like everything the trainer writes
    (whatever the launcher's own umask)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    return os.fdopen(fd, "ab")


def main_pid(unit: str) -> int:
    """The unit's main process, or 0 (no such unit, not running, systemctl unanswering)."""
    try:
        out = subprocess.run(
            systemctl("show", "-p", "MainPID", "--value", unit),
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT,
            check=False,
        )
        return int(out.stdout.strip() or 0)
    except (OSError, subprocess.SubprocessError, ValueError):
        return 0


def _wait_main_pid(unit: str, runner: subprocess.Popen[bytes], log_file: str) -> int:
    for _ in range(int(START_TIMEOUT / POLL)):
        pid = main_pid(unit)
        if pid > 0:
            return pid
        if runner.poll() is not None:
            raise LaunchError(
                f"the trainer unit {unit} ended as it started (systemd-run exited "
                f"{runner.returncode}); see {log_file}"
            )
        SYSTEM.sleep(POLL)
    raise LaunchError(f"the trainer unit {unit} did not start within {START_TIMEOUT:.0f}s")


def start_unit(
    job: TrainJob, paths: RunPaths, trainer_argv: Sequence[str], python: str
) -> tuple[str, int]:
    """Start the trainer's unit; returns (unit, main pid)."""
    unit = unit_name(job.name)
    needs_token = job_needs_hub_token(job)
    # From the environment by the pipe; else the trainer reads huggingface_hub's stored login
    # itself (homes are read-only, not hidden).
    token = hub_token() if needs_token else None
    for folder in writable_paths(job, paths):
        try:
            folder.mkdir(parents=True, exist_ok=True)  # ReadWritePaths= skips a missing one
        except OSError as exc:
            log.debug("cannot make %s for the trainer: %s", folder, exc)
    argv = list(trainer_argv)
    if token is not None:
        argv = isolated(python, "runspec.trainer.tokenpipe", *argv)
    cmd = systemd_run_command(job, paths, argv, needs_token=needs_token)
    stdin = token_pipe(token)
    try:
        with open_log(job.log) as out:
            runner = subprocess.Popen(cmd, stdin=stdin, stdout=out, stderr=out)
    except OSError as exc:
        raise LaunchError(f"could not start the trainer unit {unit}: {exc}") from exc
    finally:
        if stdin != subprocess.DEVNULL:
            os.close(stdin)
    try:
        return unit, _wait_main_pid(unit, runner, job.log)
    finally:
        if runner.poll() is None:
            runner.terminate()  # our own child, by its handle: the unit runs on
        runner.wait(timeout=START_TIMEOUT)
