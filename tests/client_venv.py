"""A venv with the lowest huggingface_hub the project's pin allows, and runspec's other core
dependencies, built once and cached like the engines' (tests/engine_venvs.py): runspec itself
runs there from this checkout (PYTHONPATH), so a test sees what a user with the oldest allowed
client gets. Where it cannot be built (no registry) the test skips, except under CI=true.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine_venvs import cache_root

REPO = Path(__file__).resolve().parent.parent
_PIN = re.compile(r'^\s*"huggingface_hub>=([0-9][0-9.]*)",', re.MULTILINE)
_DEPENDENCIES = re.compile(r"^dependencies = \[(.*?)^\]", re.MULTILINE | re.DOTALL)


def lowest_pin() -> str:
    """The version in pyproject.toml's `huggingface_hub>=` requirement."""
    found = _PIN.search((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert found is not None, "pyproject.toml pins huggingface_hub>=VERSION"
    return found.group(1)


def _requirements() -> list[str]:
    block = _DEPENDENCIES.search((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert block is not None
    listed = re.findall(r'^\s*"([^"]+)",', block.group(1), re.MULTILINE)
    return [f"huggingface_hub=={lowest_pin()}"] + [
        r for r in listed if not r.startswith("huggingface_hub")
    ]


def _build(folder: Path) -> None:
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(partial)], check=True)
    pip = [str(partial / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]
    subprocess.run([*pip, *_requirements()], check=True, capture_output=True)
    partial.rename(folder)


def lowest_client_python() -> Path:
    """The python of the cached venv (built first if need be), or a skip where it cannot be."""
    root = cache_root()
    folder = root / f"huggingface_hub-{lowest_pin()}"
    python = folder / "bin" / "python"
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not python.exists():
            with (root / f"{folder.name}.lock").open("w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not python.exists():
                    _build(folder)
    except (OSError, subprocess.CalledProcessError) as exc:
        reason = f"cannot build a venv with huggingface_hub {lowest_pin()}: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return python
