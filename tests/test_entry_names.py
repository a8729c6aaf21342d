"""The two program names that outlive the move: `python -m runspec.trainer` (the trainer's
unit runs it, and the launcher knows a trainer by it) and `python -m runspec.failsafe` (timers
and watchers armed by an older runspec run it; new ones run runspec.machine.failsafe)."""

from __future__ import annotations

import subprocess
import sys


def help_of(module: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_trainer_starts_by_its_name() -> None:
    done = help_of("runspec.trainer")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m runspec.trainer [-h] --job JOB")


def test_the_failsafe_starts_by_its_old_name() -> None:
    old, new = help_of("runspec.failsafe"), help_of("runspec.machine.failsafe")
    assert old.returncode == new.returncode == 0, old.stderr + new.stderr
    assert "{fire,watch}" in old.stdout
    assert old.stdout == new.stdout
