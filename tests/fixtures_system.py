"""Fixtures for the system tests: runspecd installed into a freshly booted container."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.system.harness import Container, python_prefix, why_unavailable

REPO = Path(__file__).resolve().parent.parent


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


@pytest.fixture
def runspecd_container(tmp_path: Path) -> Iterator[Installed]:
    reason = why_unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"system tests must run in CI: {reason}")
        pytest.skip(reason)
    root = tmp_path / "root"
    runspec = Path(sys.executable).with_name("runspec")
    subprocess.run(
        [sys.executable, "-m", "runspec", "install", "--root", str(root), "--exec", str(runspec)],
        check=True,
        capture_output=True,
        timeout=60,
        cwd=REPO,
    )
    (root / "etc/runspec/runspecd.yaml").write_text("shutdown_push_timeout: 1m\n")
    os.chmod(tmp_path, 0o755)  # the bound folders' parents, as the daemon's check sees them
    container = Container(
        tmp_path / "container",
        binds=[
            (root / "etc/systemd/system", Path("/etc/systemd/system")),
            (root / "etc/runspec", Path("/etc/runspec")),
            (root / "var/lib/runspec", Path("/var/lib/runspec")),
        ],
        ro_binds=[python_prefix(), REPO],
    )
    try:
        container.boot()
        yield Installed(container, root)
    finally:
        container.close()
