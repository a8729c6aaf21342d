"""A failsafe that does not need runspec alive: a transient systemd timer, armed when the run
starts, that applies the run's `finish.unverified` choice at deadline + overrun (+ a short
grace, so a live lifecycle acts first) if nothing else has ended the run by then.

    systemd-run --unit runspec-failsafe-NAME --on-calendar "YYYY-MM-DD HH:MM:SS UTC" ...
        PYTHON -m runspec.machine.failsafe fire --state STATE NAME

The timer's service reads the daemon's EnvironmentFile for the provider's credentials (secrets
are never put on the command line). Without systemd (most containers) a detached watcher
process (runspec.machine.watcher) stands in for the timer, with the daemon's environment.

Firing only reads the run record: a finished run is left alone; any other goes to the
machine's end (runspec.machine.endgame), which judges every run's files on disk: the run's finish
action when all are verified, else its unverified choice (never a destroy). What the timer did
goes to the run's own `failsafe.json`, never into its record, which only its owner writes.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import logging
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from runspec.budget import overrun_end
from runspec.clock import SYSTEM, Clock, utc_iso
from runspec.errors import RunspecError
from runspec.machine import watcher
from runspec.machine.armedspec import armed_with, changed_since_armed
from runspec.machine.endgame import Endgame
from runspec.machine.host import FinishHost
from runspec.machine.watcher import end_unconfirmed
from runspec.secrets.apartuid import rejoin, set_apart
from runspec.secrets.undumpable import make_undumpable
from runspec.spec.loader import load_accepted
from runspec.spec.model import FinishAction, Spec
from runspec.store.atomic import write_json_atomic
from runspec.store.paths import ENV_FILE, RunPaths, StateLayout
from runspec.store.state import DamagedRecord, RecordStore, RunRecord, RunStatus

log = logging.getLogger("runspec.machine.failsafe")

GRACE_S = 120.0  # after deadline + overrun: the lifecycle's own unverified finish comes first
# A test seam (tests/test_readonly_daemon.py waits the grace out for real): a shorter grace, in
# seconds, from 1 to GRACE_S; anything else, or unset, is the full grace.
GRACE_ENV = "RUNSPEC_TEST_FAILSAFE_GRACE_S"
SYSTEMCTL_TIMEOUT = 30.0

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), capture_output=True, text=True, timeout=SYSTEMCTL_TIMEOUT, check=False
    )


def unit_name(name: str) -> str:
    return f"runspec-failsafe-{name}"


def systemd_running(root: Path = Path("/")) -> bool:
    """systemd is PID 1 here (sd_booted()) and systemd-run is installed."""
    return (root / "run/systemd/system").is_dir() and shutil.which("systemd-run") is not None


def grace_s() -> float:
    """The grace after deadline + overrun: GRACE_S, or the test seam's shorter one."""
    try:
        seam = float(os.environ.get(GRACE_ENV, "")[:16])
    except ValueError:
        return GRACE_S
    return seam if math.isfinite(seam) and 1.0 <= seam <= GRACE_S else GRACE_S


def fire_time(record: RunRecord, spec: Spec) -> float:
    return overrun_end(record, spec) + grace_s()


def calendar(ts: float) -> str:
    """An OnCalendar= time systemd reads unambiguously: `2026-11-30 03:00:00 UTC`."""
    return dt.datetime.fromtimestamp(ts, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def arm_command(
    spec: Spec, paths: RunPaths, at: float, *, python: str = sys.executable, dry_run: bool = False
) -> list[str]:
    unit = unit_name(spec.name)
    argv = [
        "systemd-run",
        f"--unit={unit}",
        f"--description=runspec failsafe for run {spec.name}",
        f"--on-calendar={calendar(at)}",
        "--timer-property=AccuracySec=1s",
        f"--property=EnvironmentFile=-{ENV_FILE}",
        "--collect",
        "--",
        python,
        "-m",
        "runspec.machine.failsafe",
        "fire",
        f"--state={paths.state}",
        *armed_with(spec),
        spec.name,
    ]
    if dry_run:
        argv.insert(-1, "--dry-run")
    return argv


def disarm_command(name: str) -> list[str]:
    return ["systemctl", "stop", f"{unit_name(name)}.timer"]


@dataclass(frozen=True)
class FailsafeState:
    armed: bool
    unit: str
    fire_at: str | None
    command: list[str]
    detail: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _state_file(paths: RunPaths) -> Path:
    return paths.failsafe_file


def arm(
    spec: Spec,
    paths: RunPaths,
    record: RunRecord,
    *,
    clock: Clock = SYSTEM,
    runner: Runner = _run,
    root: Path = Path("/"),
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
) -> FailsafeState:
    """Arm the timer for this run (re-arming replaces an older one); never raises."""
    say = progress or (lambda line: log.info("%s: %s", spec.name, line))
    unit = unit_name(spec.name)
    try:
        at = fire_time(record, spec)
    except ValueError as exc:
        return FailsafeState(False, unit, None, [], str(exc))
    # Re-armed after its time (the daemon came back late): an OnCalendar= time in the past
    # never elapses, so the timer would wait forever. Fire a grace after now instead, which
    # still leaves the live lifecycle its chance to act first.
    at = max(at, clock.time() + grace_s())
    argv = arm_command(spec, paths, at, dry_run=dry_run)
    if not systemd_running(root):
        state = _arm_watcher(spec, paths, at, dry_run)
        say(f"failsafe: {state.detail}")
    else:
        runner(disarm_command(spec.name))  # a timer left by an earlier start of this run
        try:
            proc = runner(argv)
            ok, err = proc.returncode == 0, (proc.stderr or "").strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            ok, err = False, str(exc)
        detail = (
            f"timer {unit}.timer {failsafe_does(spec)} at {utc_iso(at)} unless the run has ended"
            if ok
            else f"arming {unit} failed: {err[:300]}"
        )
        state = FailsafeState(ok, unit, utc_iso(at), argv, detail)
        say(f"failsafe: {detail}")
    try:
        write_json_atomic(_state_file(paths), state.to_json())
    except OSError as exc:
        log.warning("%s: cannot record the failsafe state: %s", spec.name, exc)
    return state


def failsafe_does(spec: Spec) -> str:
    """What firing will really do (runspec.machine.finish.decide on what the disk holds then)."""
    finish = spec.finish
    if finish.action is FinishAction.NONE:
        return "applies nothing to the machine (finish.action is none)"
    return (
        f"applies finish.action ({finish.action.value}) if every weight is verified, else "
        f"finish.unverified ({finish.unverified.value})"
    )


def watch_command(
    spec: Spec, paths: RunPaths, at: float, *, python: str = sys.executable, dry_run: bool = False
) -> list[str]:
    argv = [
        python,
        "-m",
        "runspec.machine.failsafe",
        "watch",
        f"--state={paths.state}",
        f"--at={at:.0f}",
        *armed_with(spec),
    ]
    return [*argv, *(["--dry-run"] if dry_run else []), spec.name]


def _arm_watcher(spec: Spec, paths: RunPaths, at: float, dry_run: bool) -> FailsafeState:
    """No systemd here: a detached watcher process stands in for the timer."""
    argv = watch_command(spec, paths, at, dry_run=dry_run)
    watcher.stop(paths)  # one left by an earlier start of this run
    try:
        watcher.start(argv, paths.failsafe_log)
    except (OSError, subprocess.SubprocessError) as exc:
        return FailsafeState(
            False,
            "watcher",
            utc_iso(at),
            argv,
            f"no systemd here and the failsafe watcher could not start ({exc}): if runspec "
            "dies the machine keeps billing",
        )
    detail = (
        f"no systemd here: a detached watcher {failsafe_does(spec)} at {utc_iso(at)} unless "
        "the run has ended"
    )
    return FailsafeState(True, "watcher", utc_iso(at), argv, detail)


def disarm(
    spec: Spec,
    paths: RunPaths,
    *,
    runner: Runner = _run,
    root: Path = Path("/"),
    progress: Callable[[str], None] | None = None,
) -> bool:
    """Remove the run's timer (the run has ended); True when a timer was stopped."""
    say = progress or (lambda line: log.info("%s: %s", spec.name, line))
    if not systemd_running(root):
        if watcher.stop(paths):
            say("failsafe: the watcher stopped")
            _state_file(paths).unlink(missing_ok=True)
            return True
        return False
    try:
        proc = runner(disarm_command(spec.name))
    except (OSError, subprocess.TimeoutExpired) as exc:
        say(f"failsafe: could not disarm {unit_name(spec.name)}: {exc}")
        return False
    if proc.returncode == 0:
        say(f"failsafe: {unit_name(spec.name)}.timer disarmed")
        _state_file(paths).unlink(missing_ok=True)
        return True
    return False


def should_fire(record: RunRecord) -> tuple[bool, str]:
    if record.status is RunStatus.FINISHED and end_unconfirmed(record):
        return True, "the run ended, but the machine's end was never confirmed"
    if record.status is RunStatus.FINISHED:
        return False, "the run has ended; nothing to do"
    if record.status is RunStatus.QUEUED:
        return False, "the run never started"
    return True, f"the run is still {record.status.value} past deadline + overrun"


def fire(
    state_dir: Path,
    name: str,
    *,
    clock: Clock = SYSTEM,
    dry_run: bool = False,
    progress: Callable[[str], None] = print,
    host: FinishHost | None = None,
    armed_sha256: str | None = None,
) -> int:
    """What the timer runs. 0 when nothing was needed or the finish did its part.
    `armed_sha256`: the spec it was armed with; a spec.yaml that is not that one is refused."""
    # Only firing reads a spec: arming stays importable with the lightest dependencies.

    layout = StateLayout(state_dir)
    paths = layout.run_paths(name)
    try:
        record = RecordStore(state_dir, clock).load(name)
    except DamagedRecord as exc:
        # Its status is unknown, but its job folder still says what it asked for: the
        # machine's end goes on from there (never a destroy: its weights cannot be judged).
        progress(f"failsafe: {name}: {exc}; acting on its job folder")
    else:
        if record is None and RecordStore(state_dir, clock).damaged(name) is not None:
            progress(
                f"failsafe: {name}: its record was set aside as damaged; acting on its job folder"
            )
        elif record is None:
            why = f"no run named {name!r} in {state_dir}"
            progress(f"failsafe: {why}")
            _note_fired(paths, clock, {"applied": False, "why": why})
            return 1
        else:
            go, why = should_fire(record)
            progress(f"failsafe: {name}: {why}")
            if not go:
                return 0
    try:
        spec = load_accepted(paths.spec_file)
    except RunspecError as exc:
        progress(f"failsafe: {name}: cannot read the run's spec, nothing applied: {exc}")
        _note_fired(paths, clock, {"applied": False, "why": f"spec unreadable: {exc}"})
        return 1
    changed = changed_since_armed(spec, armed_sha256)
    if changed is not None:
        progress(f"failsafe: {name}: {changed}")
        _note_fired(paths, clock, {"applied": False, "why": changed})
        return 1
    # The failsafe is the last one asking: past the deadline plus overrun it keeps asking the
    # provider for the whole end window, not the shorter floor an end on the box gets.
    base = host or FinishHost()
    host = dataclasses.replace(base, least_window=max(base.least_window, base.end_window))
    endgame = Endgame(layout, clock=clock, dry_run=dry_run, host=host, say=progress)
    outcome = endgame.failsafe(name, spec.finish, spec.budget.hourly_cost)
    result = outcome.result.to_json() if outcome.result is not None else None
    _note_fired(paths, clock, {"applied": result is not None, "why": outcome.why, "result": result})
    return 0 if outcome.result is not None and outcome.result.ok else 1


def _note_fired(paths: RunPaths, clock: Clock, fired: dict[str, Any]) -> None:
    """What the timer did, beside its armed state in the run's own failsafe.json."""
    try:
        data = json.loads(paths.failsafe_file.read_text())
    except (OSError, ValueError):
        data = {}
    data = data if isinstance(data, dict) else {}
    data["fired"] = {"time": utc_iso(clock.time()), **fired}
    try:
        write_json_atomic(paths.failsafe_file, data)
    except OSError as exc:
        log.warning("%s: cannot record what the failsafe did: %s", paths.name, exc)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runspec.machine.failsafe")
    sub = parser.add_subparsers(dest="cmd", required=True)
    fire_p = sub.add_parser("fire", help="apply the run's unverified finish if it has not ended")
    fire_p.add_argument("--state", type=Path, required=True)
    fire_p.add_argument("--dry-run", action="store_true")
    fire_p.add_argument("--spec-sha256", help="the spec it was armed with")
    fire_p.add_argument("name")
    watch_p = sub.add_parser("watch", help="without systemd: wait for the fire time, then fire")
    watch_p.add_argument("--state", type=Path, required=True)
    watch_p.add_argument("--at", type=float, required=True, help="epoch seconds")
    watch_p.add_argument("--dry-run", action="store_true")
    watch_p.add_argument("--spec-sha256", help="the spec it was armed with")
    watch_p.add_argument("name")
    args = parser.parse_args(argv)
    # It holds the provider's keys (the daemon's environment): no process of its uid without
    # CAP_SYS_PTRACE (a trainer outside systemd) reads its /proc/PID/environ or ptraces it.
    make_undumpable()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.cmd == "watch":
        return _watch(args.state, args.name, args.at, args.dry_run, args.spec_sha256)
    return fire(args.state, args.name, dry_run=args.dry_run, armed_sha256=args.spec_sha256)


def _watch(state: Path, name: str, at: float, dry_run: bool, armed: str | None) -> int:
    """The watcher waits out of the trainer's reach (runspec.secrets.apartuid: a trainer of
    uid 0 outside systemd cannot kill it), and fires as root whole."""
    apart = set_apart()
    if apart is not None:
        print(f"failsafe watcher for {name}: {apart}: a trainer of uid 0 could end it", flush=True)

    def fire_now() -> int:
        rejoin()
        return fire(state, name, dry_run=dry_run, armed_sha256=armed)

    return watcher.watch(StateLayout(state).run_paths(name), at, fire_now)


if __name__ == "__main__":
    sys.exit(main())
