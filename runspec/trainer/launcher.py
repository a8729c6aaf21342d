"""Start the trainer detached from whoever started it, find it again, and stop it safely.

Where systemd runs (/run/systemd/system exists) the trainer is its own transient unit, so it
outlives the daemon and its whole cgroup (LibreYOLO's multi-GPU coordinator included) can be
signalled. Elsewhere it runs in its own session, output to `<run_dir>/console.log`. Either way
its identity (pid, start time, boot id, and the unit) goes to `<job_dir>/trainer.json`, and is
checked before any signal: a recycled pid is never signalled.

A live trainer is found again by every route there is (`TrainerHandle.find`): trainer.json,
its unit's name, the trainer lock it holds, and its command line (which names the run's job
file), so losing one file never starts a second trainer; the trainer itself refuses to run
while another holds the lock.

Light: no torch, no libreyolo (the daemon imports this).
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from runspec.childpython import isolated
from runspec.clock import SYSTEM, Clock
from runspec.identity import ProcessIdentity
from runspec.secrets.apartuid import trainers_are_units
from runspec.store.atomic import write_text
from runspec.store.locks import holder
from runspec.store.paths import RunPaths
from runspec.trainer import control
from runspec.trainer.control import TrainerOutcome, TrainerResult, TrainJob
from runspec.trainer.sessionwalls import job_needs_hub_token
from runspec.trainer.trainerunit import (
    POLL,
    START_TIMEOUT,
    LaunchError,
    main_pid,
    open_log,
    start_unit,
    systemctl,
    trainer_env,
    unit_name,
)

log = logging.getLogger("runspec.trainer.launcher")

SYSTEMD_RUNNING = Path("/run/systemd/system")
_TERM_GRACE = 10.0  # after SIGTERM, before SIGKILL
# The run folder and what the trainer writes into it are its owner's alone: weights and logs
# may hold what a dataset or a model should not show to other users of the machine.
RUN_DIR_MODE = 0o700
TRAINER_UMASK = 0o077


def _trainer_argv(job_file: Path) -> list[str]:
    return isolated(sys.executable, "runspec.trainer", "--job", str(job_file))


def _make_folders(job: TrainJob) -> None:
    Path(job.log).parent.mkdir(mode=RUN_DIR_MODE, parents=True, exist_ok=True)
    Path(job.weights_cache).mkdir(parents=True, exist_ok=True)


def _start_session(job: TrainJob, job_file: Path) -> tuple[subprocess.Popen[bytes], int]:
    _make_folders(job)
    # Secrets are inherited, never put on a command line; the token only where it is needed.
    env = trainer_env(job, with_token=job_needs_hub_token(job))
    with open_log(job.log) as out:
        proc = subprocess.Popen(
            _trainer_argv(job_file),
            cwd=job.run_dir,  # its own, not the cache other runs write (issue 18)
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            umask=TRAINER_UMASK,  # as the unit's UMask=
        )
    return proc, proc.pid


def start(
    job: TrainJob,
    paths: RunPaths,
    *,
    use_systemd: bool | None = None,
    clock: Clock = SYSTEM,
    log_line: Callable[[str], None] | None = None,
) -> TrainerHandle:
    """Start the trainer for `job`; its identity is saved to `<job_dir>/trainer.json`."""
    if use_systemd is None:
        use_systemd = trainers_are_units()
    control_dir = Path(job.control_dir)
    other = holder(control_dir / control.TRAINER_LOCK_FILE)
    if other is not None:
        raise LaunchError(
            f"a trainer ({other}) already trains run {job.name}; not starting a second"
        )
    control.clear_for_launch(control_dir)
    job_file = paths.train_job_file
    job.write(job_file)
    proc: subprocess.Popen[bytes] | None = None
    unit: str | None = None
    if use_systemd:
        _make_folders(job)
        unit, pid = start_unit(job, paths, _trainer_argv(job_file), sys.executable)
    else:
        proc, pid = _start_session(job, job_file)
    ident = ProcessIdentity.of(pid)
    if ident is None:
        # It died before we could look at it: still record what we know, alive() says False.
        ident = ProcessIdentity(pid=pid, start_ticks=-1, boot_id="")
    handle = TrainerHandle(
        identity=ident,
        unit=unit,
        control_dir=control_dir,
        run_dir=job.run_dir,
        trainer_file=paths.trainer_file,
        started_at=clock.time(),
        clock=clock,
        log_line=log_line,
        _proc=proc,
    )
    handle.save()
    handle._log(f"trainer started: pid {pid}" + (f", unit {unit}" if unit else ""))
    return handle


def _live_trainer_pids(paths: RunPaths) -> list[tuple[str, int, str | None]]:
    """(how found, pid, unit) of every process that looks like this run's trainer."""
    found: list[tuple[str, int, str | None]] = []
    unit = unit_name(paths.name)
    if SYSTEMD_RUNNING.is_dir() and shutil.which("systemctl") is not None:
        pid = main_pid(unit)
        if pid > 0:
            found.append((f"its unit {unit}", pid, unit))
    locked = holder(paths.control_dir / control.TRAINER_LOCK_FILE)
    if locked is not None and locked.pid > 0:
        found.append(("the trainer lock it holds", locked.pid, None))
    job_file = str(paths.train_job_file)
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if "runspec.trainer" in cmdline and job_file in cmdline:
            found.append(("its command line", int(proc.info["pid"]), None))
    return found


@dataclass
class TrainerHandle:
    identity: ProcessIdentity
    unit: str | None
    control_dir: Path
    run_dir: Path
    trainer_file: Path
    started_at: float
    clock: Clock = SYSTEM
    log_line: Callable[[str], None] | None = None
    _proc: subprocess.Popen[bytes] | None = None  # only in the process that started it

    # --- persistence ---

    def save(self) -> None:
        data = {
            "identity": self.identity.to_json(),
            "unit": self.unit,
            "control_dir": str(self.control_dir),
            "run_dir": str(self.run_dir),
            "started_at": self.started_at,
        }
        write_text(self.trainer_file, json.dumps(data, indent=2) + "\n")

    @classmethod
    def load(
        cls,
        paths: RunPaths,
        clock: Clock = SYSTEM,
        log_line: Callable[[str], None] | None = None,
    ) -> TrainerHandle | None:
        """The trainer recorded for this run, or None if none was. The handle is returned even
        when that trainer has exited (its result is still wanted); every signal it sends checks
        the identity first, so a recycled pid is never touched."""
        path = paths.trainer_file
        try:
            data = json.loads(path.read_text())
            return cls(
                identity=ProcessIdentity.from_json(data["identity"]),
                unit=data.get("unit"),
                control_dir=Path(data["control_dir"]),
                run_dir=Path(data["run_dir"]),
                trainer_file=path,
                started_at=float(data["started_at"]),
                clock=clock,
                log_line=log_line,
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @classmethod
    def find(
        cls,
        paths: RunPaths,
        clock: Clock = SYSTEM,
        log_line: Callable[[str], None] | None = None,
    ) -> TrainerHandle | None:
        """The run's trainer: alive by any route, else the recorded one (maybe exited, for its
        result), else None. A live trainer found without trainer.json gets it back."""
        saved = cls.load(paths, clock, log_line)
        if saved is not None and saved.alive():
            return saved
        for how, pid, unit in _live_trainer_pids(paths):
            ident = ProcessIdentity.of(pid)
            if ident is None or not ident.alive():
                continue
            try:
                started = psutil.Process(pid).create_time()
            except psutil.Error:
                started = clock.time()
            handle = cls(
                identity=ident,
                unit=unit,
                control_dir=paths.control_dir,
                run_dir=paths.run_dir,
                trainer_file=paths.trainer_file,
                started_at=started,
                clock=clock,
                log_line=log_line,
            )
            handle.save()
            handle._log(f"found the run's live trainer by {how} (pid {pid}); trainer.json restored")
            return handle
        return saved

    # --- state ---

    def _log(self, message: str) -> None:
        log.info("%s", message)
        if self.log_line is not None:
            self.log_line(message)

    def alive(self) -> bool:
        if self._proc is not None and self._proc.poll() is not None:
            return False  # our own child, now reaped
        return self.identity.alive()

    def result(self) -> TrainerResult | None:
        """How the trainer ended; None while it is still running."""
        if self.alive():
            return None
        written = control.read_result(self.control_dir)
        if written is not None:
            return written
        code = None
        if self._proc is not None:
            try:
                code = self._proc.wait(timeout=_TERM_GRACE)  # reap it: it has exited
            except subprocess.TimeoutExpired:
                code = None
        why = "no result written: killed by a signal, the OOM killer or a reboot"
        if code is not None and code < 0:
            why = f"killed by {signal.Signals(-code).name}"
        return TrainerResult(outcome=TrainerOutcome.KILLED, reason=why, exit_code=code)

    # --- stopping ---

    def request_stop(self, reason: str) -> None:
        """Ask for a stop at the next epoch boundary (takes effect even if we go away)."""
        control.request_stop(self.control_dir, reason)
        self._log(f"stop requested: {reason}")

    def _descendants(self) -> list[ProcessIdentity]:
        """The trainer's descendants (LibreYOLO's multi-GPU coordinator runs in a session of its
        own, out of reach of a signal to the trainer's group), identified now."""
        if not self.identity.matches():
            return []
        try:
            children = psutil.Process(self.identity.pid).children(recursive=True)
        except psutil.Error:
            return []
        found = [ProcessIdentity.of(child.pid) for child in children]
        return [ident for ident in found if ident is not None]

    def _signal(self, sig: signal.Signals) -> None:
        if self.unit is not None and self.identity.matches():
            subprocess.run(
                systemctl("kill", f"--signal={sig.name}", "--kill-whom=all", self.unit),
                capture_output=True,
                timeout=START_TIMEOUT,
                check=False,
            )
            self._log(f"sent {sig.name} to unit {self.unit}")
            return
        descendants = self._descendants()
        if self.identity.signal_group(sig):
            self._log(f"sent {sig.name} to the trainer's process group {self.identity.pid}")
        else:
            self._log(f"not sending {sig.name}: pid {self.identity.pid} is not our trainer")
        for ident in descendants:
            if ident.signal_group(sig):
                self._log(f"sent {sig.name} to trainer descendant {ident.pid}")

    def _wait_exit(self, timeout: float) -> bool:
        deadline = self.clock.monotonic() + max(timeout, 0.0)
        while self.alive():
            if self.clock.monotonic() >= deadline:
                return False
            self.clock.sleep(POLL)
        return True

    def stop(self, grace_s: float, reason: str = "stop requested") -> None:
        """Request a stop, wait up to grace_s for the epoch boundary, then SIGTERM the trainer
        (which, with a stop already pending, makes it exit at once), then SIGKILL."""
        if not self.alive():
            return
        self.request_stop(reason)
        if self._wait_exit(grace_s):
            self._log("trainer stopped at an epoch boundary")
            return
        self._log(f"trainer still running after {grace_s:.0f}s: SIGTERM")
        self._signal(signal.SIGTERM)
        if self._wait_exit(_TERM_GRACE):
            self._log("trainer exited after SIGTERM")
            return
        self._log(f"trainer still running {_TERM_GRACE:.0f}s after SIGTERM: SIGKILL")
        self.kill_now()

    def kill_now(self) -> None:
        self._signal(signal.SIGKILL)
        if not self._wait_exit(_TERM_GRACE):
            self._log(f"trainer pid {self.identity.pid} survived SIGKILL for {_TERM_GRACE:.0f}s")
