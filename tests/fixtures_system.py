"""Fixtures for the system tests: runspecd installed into a freshly booted container.

The unit is the shipped file exactly as `runspec install` writes it (its sandbox included);
the test's own changes are in one drop-in, `test.conf`: only where this checkout's code is
when it is not the one the virtual environment installed (PYTHONPATH).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_daemon import runspec_cli
from tests.system.harness import Container, python_prefix, why_unavailable

REPO = Path(__file__).resolve().parent.parent
SHIPPED_UNIT = REPO / "systemd" / "runspecd.service"
UNIT_NAME = "runspecd.service"


def code_binds() -> list[Path]:
    """What the container needs to run this checkout: the interpreter, the virtual
    environment (when it is not inside the checkout) and the checkout."""
    venv = Path(sys.prefix)
    binds = [python_prefix(), REPO]
    return binds if venv.is_relative_to(REPO) else [*binds, venv]


def install(root: Path) -> subprocess.CompletedProcess[str]:
    """`runspec install --root ROOT` of this environment's runspec program."""
    root.mkdir(parents=True, exist_ok=True)  # install refuses a root that is not there
    runspec = Path(sys.executable).with_name("runspec")
    return runspec_cli("install", "--root", str(root), "--exec", str(runspec), timeout=60)


def test_dropin() -> str:
    """The test's own drop-in: the checkout's code first on the import path when the test
    runs with PYTHONPATH (a worktree beside the one the venv installed), else nothing."""
    text = "# The system tests' own settings; the shipped unit is untouched.\n[Service]\n"
    path = os.environ.get("PYTHONPATH")
    if path:
        text += f"Environment=PYTHONPATH={path}\n"
    return text


@dataclass
class Installed:
    container: Container
    root: Path  # what `runspec install --root` wrote, bound into the container

    @property
    def state(self) -> Path:
        return self.root / "var/lib/runspec"

    @property
    def inbox(self) -> Path:
        return self.state / "inbox"

    def submit(self, name: str, text: str) -> None:
        """Drop `name`.yaml into the inbox whole, as `runspec submit` does."""
        tmp = self.inbox / f".{name}.yaml.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.inbox / f"{name}.yaml")

    def record(self, name: str) -> dict[str, Any]:
        """The run's record as the daemon last saved it; {} before it exists."""
        try:
            data: dict[str, Any] = json.loads((self.state / f"jobs/{name}/record.json").read_text())
            return data
        except (OSError, ValueError):
            return {}


@pytest.fixture
def runspecd_container(tmp_path: Path) -> Iterator[Installed]:
    reason = why_unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"system tests must run in CI: {reason}")
        pytest.skip(reason)
    root = tmp_path / "root"
    installed = install(root)
    assert installed.returncode == 0, installed.stderr
    (root / "etc/runspec/runspecd.yaml").write_text("shutdown_push_timeout: 1m\n")
    unit = root / "etc/systemd/system" / UNIT_NAME
    assert unit.read_bytes() == SHIPPED_UNIT.read_bytes(), "install changed the shipped unit"
    test_conf = root / "etc/systemd/system" / f"{UNIT_NAME}.d" / "test.conf"
    test_conf.write_text(test_dropin())
    os.chmod(tmp_path, 0o755)  # the bound folders' parents, as the daemon's check sees them
    container = Container(
        tmp_path / "container",
        binds=[
            (root / "etc/systemd/system", Path("/etc/systemd/system")),
            (root / "etc/runspec", Path("/etc/runspec")),
            (root / "var/lib/runspec", Path("/var/lib/runspec")),
        ],
        ro_binds=code_binds(),
    )
    try:
        container.boot()
        path = os.environ.get("PYTHONPATH")
        if path:
            # Units started beside the daemon (the failsafe's timer) import the same code.
            container.sh('systemctl set-environment PYTHONPATH="$1"', args=(path,))
        yield Installed(container, root)
    finally:
        container.close()
