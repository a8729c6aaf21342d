"""The engines' own validators, each in a venv of its own, built once and cached.

SkyPilot (about 460 MB) and dstack (about 160 MB) are optional extras and never enter the
project's venv: a test that checks an exported file runs the engine's validator in a venv kept
under ~/.cache/runspec-test-engines/<engine>-<version> (RUNSPEC_TEST_ENGINES moves it). The
first test to need one builds it under a lock, so two xdist workers never build it twice; a
half-built venv is never used (it is renamed into place only when pip is done). Where it cannot
be built (no registry) the test skips, except under CI=true, where it fails.

`python tests/engine_venvs.py` builds both and prints how long each took.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

VERSIONS = {"skypilot": "0.14.1", "dstack": "0.22.5"}

# Reads a YAML file and runs the engine's validator on it; prints "ok", the node count and the
# sha256 of the carried spec as the engine parsed it (or the validator's error).
VALIDATORS = {
    # from_yaml_config mutates the dict it is given: a deep copy, as engines.md measured.
    "skypilot": (
        "import copy, hashlib, sys, yaml, sky\n"
        "cfg = yaml.safe_load(open(sys.argv[1]))\n"
        "task = sky.Task.from_yaml_config(copy.deepcopy(cfg))\n"
        "spec = task.envs.get('RUNSPEC_SPEC_YAML', '')\n"
        "print('ok', task.num_nodes, hashlib.sha256(spec.encode()).hexdigest())\n"
    ),
    # dstack's server passes every env value through its VariablesInterpolator before the job
    # starts (server/services/jobs/__init__.py, interpolate_job_spec_secrets: `$$` becomes `$`,
    # `${{ secrets.NAME }}` the secret): the spec hashed is the one the job gets.
    "dstack": (
        "import hashlib, sys, yaml\n"
        "from dstack.api import Task\n"
        "from dstack._internal.utils.interpolator import VariablesInterpolator\n"
        "task = Task.model_validate(yaml.safe_load(open(sys.argv[1])))\n"
        "server = VariablesInterpolator({'secrets': {'hf_token': 'x'}}).interpolate_or_error\n"
        "spec = server(task.env.as_dict().get('RUNSPEC_SPEC_YAML', ''))\n"
        "print('ok', task.nodes, hashlib.sha256(spec.encode()).hexdigest())\n"
    ),
}


def cache_root() -> Path:
    default = Path.home() / ".cache" / "runspec-test-engines"
    return Path(os.environ.get("RUNSPEC_TEST_ENGINES", default))


def _build(engine: str, folder: Path) -> None:
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(partial)], check=True)
    requirement = f"{engine}=={VERSIONS[engine]}"
    # --no-compile: pip would byte-compile every module of the engine (SkyPilot brings
    # hundreds); the validator compiles the few it imports, once (dstack: 36.5 s against 58.1 s).
    subprocess.run(
        [
            str(partial / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",
            requirement,
        ],
        check=True,
        capture_output=True,
    )
    partial.rename(folder)


def engine_python(engine: str) -> Path:
    """The python of the engine's cached venv, built first if need be."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f"{engine}-{VERSIONS[engine]}"
    python = folder / "bin" / "python"
    if python.exists():
        return python
    with (root / f"{folder.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not python.exists():  # another worker may have built it while this one waited
            _build(engine, folder)
    return python


def validator_python(engine: str) -> Path:
    """engine_python, or a skip (a failure under CI=true) where it cannot be built."""
    try:
        return engine_python(engine)
    except (OSError, subprocess.CalledProcessError) as exc:
        reason = f"cannot build the {engine} venv: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def validate(engine: str, task_file: Path) -> subprocess.CompletedProcess[str]:
    """Runs the engine's own validator on the file; the caller asserts on its outcome."""
    python = validator_python(engine)
    return subprocess.run(
        [str(python), "-c", VALIDATORS[engine], str(task_file)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


if __name__ == "__main__":
    figures = {}
    for name in VERSIONS:
        start = time.monotonic()
        engine_python(name)
        figures[name] = round(time.monotonic() - start, 1)
    print(json.dumps(figures))
