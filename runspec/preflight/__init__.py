"""The preflight: checks that find in seconds what would otherwise waste GPU hours.

`run_preflight` runs the checks in a child process (`python -m runspec.preflight`), because
they import torch and the daemon must not; the child has a hard timeout, so a wedged driver or
a hung collective ends as a failed check, never as a stuck run. Phases: `machine` (versions,
GPUs, matmul, collective, writable folders, disk, HF_HOME, push target) before anything slow
is downloaded; `dataset` (libreyolo doctor, the profiler) once the dataset is staged; `all`
for both.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from runspec.checkresult import failed
from runspec.errors import Cause, GaveUp, RunspecError
from runspec.preflight.ending import finish_checks
from runspec.preflight.notifycheck import notify_checks
from runspec.preflight.report import PreflightReport
from runspec.preflight.watchcheck import watch_key_check
from runspec.secrets.redact import scrub
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths

__all__ = ["PreflightReport", "child_env", "run_preflight"]

log = logging.getLogger("runspec.preflight")
Phase = Literal["machine", "dataset", "all"]
# After the hard kill of the child (its process group or its unit), this bounds the reaping.
_REAP_S = 10.0
_POLL_S = 0.2  # how often a `give_up` is asked while the checks run


def child_env(spec: Spec) -> dict[str, str]:
    """The environment the preflight's child gets (runspec.preflight.childlaunch)."""
    from runspec.preflight import childlaunch  # noqa: PLC0415 - the parent's side; the child never loads it

    return childlaunch.child_env(spec)


def _which_spec(spec: Spec, paths: RunPaths, tmp: Path, accepted: bool) -> list[str]:
    """How the child finds the spec: an accepted run by its name (the child reads its saved
    spec and paths, never judging the spec again), any other spec as a file of its text."""
    if accepted:
        return ["--run", paths.name]
    if not spec.text:
        raise RunspecError(f"spec {spec.name!r} has no text to hand to the preflight child")
    path = tmp / "spec.yaml"
    path.write_text(spec.text, encoding="utf-8")
    # Its relative paths mean its own folder, not this temporary one (runspec.spec.specbase).
    base = Path(spec.source).absolute().parent
    return [
        "--spec",
        str(path),
        "--base",
        str(base),
        "--project",
        str(paths.project),
        "--data-root",
        str(paths.data_root),
    ]


def _communicate(
    proc: subprocess.Popen[str], timeout: float, give_up: Callable[[], bool] | None
) -> tuple[str, str]:
    """The child's output within `timeout` (TimeoutExpired past it), `give_up` polled."""
    if give_up is None:
        return proc.communicate(timeout=timeout)
    end = time.monotonic() + timeout
    while True:
        try:
            return proc.communicate(timeout=max(min(_POLL_S, end - time.monotonic()), 0.01))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= end:
                raise
        if give_up():
            raise GaveUp("the preflight was given up at a second signal")


def run_preflight(
    spec: Spec,
    paths: RunPaths,
    phase: Phase,
    timeout: float,
    collective_one_gpu: bool = False,
    *,
    accepted: bool = False,
    give_up: Callable[[], bool] | None = None,
) -> PreflightReport:
    """Run the checks of `phase` in a child with a hard `timeout` (seconds) and collect them.

    `collective_one_gpu`: run the all_reduce even when one GPU is selected (NCCL on one rank).
    `accepted`: `spec` is the run `paths` names, accepted into its state folder.
    `give_up`: polled while the checks run; when it says so, the child is ended and GaveUp
    raised (a second Ctrl-C: runspec.run.giveup).
    """
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="runspec-preflight-") as tmp:
        args = [
            *_which_spec(spec, paths, Path(tmp), accepted),
            "--state",
            str(paths.state),
            "--phase",
            phase,
            # Inner waits (the collective) must end before the hard kill does.
            "--timeout",
            f"{max(timeout * 0.8, 1.0):.1f}",
            "--json",
            *(["--collective-one-gpu"] if collective_one_gpu else []),
        ]
        from runspec.preflight.childlaunch import start_child  # noqa: PLC0415 - the parent's side only

        child = start_child(spec, paths, args, Path(tmp), timeout, accepted)
        proc = child.proc
        try:
            out, err = _communicate(proc, timeout, give_up)
        except GaveUp:
            child.kill()
            proc.communicate(timeout=_REAP_S)
            raise
        except subprocess.TimeoutExpired:
            child.kill()
            proc.communicate(timeout=_REAP_S)
            return PreflightReport(
                phase=phase,
                checks=[
                    failed(
                        "preflight",
                        f"the checks did not finish within {timeout:.0f} s (killed)",
                        "a GPU or driver that hangs is not fit to train on; check nvidia-smi, "
                        "or run `runspec preflight SPEC` to see which check stalls",
                        Cause.GPU,  # a GPU or driver that hangs the checks
                    )
                ],
                seconds=time.monotonic() - started,
            )
    if err.strip():
        log.debug("preflight child stderr:\n%s", err.rstrip())
    try:
        # A check's message may quote a Hub's answer, and a Hub or proxy may echo the token.
        report = PreflightReport.from_json(json.loads(scrub(out)))
    except (ValueError, KeyError, TypeError):
        tail = (err.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return PreflightReport(
            phase=phase,
            checks=[
                failed(
                    "preflight",
                    f"the checks crashed: {tail}",
                    "see the traceback with `runspec -v preflight SPEC`",
                )
            ],
            seconds=time.monotonic() - started,
        )
    checks = report.checks
    if phase in ("machine", "all"):
        # Here, not in the child: provider keys and notify URLs' ${NAME}s are the parent's.
        ending = finish_checks(spec.finish, folders=(paths.state, paths.project))
        checks = [*checks, *ending, *notify_checks(spec.notify, os.environ)]
        checks += watch_key_check(spec, os.environ)
    return PreflightReport(phase=report.phase, checks=checks, seconds=time.monotonic() - started)
