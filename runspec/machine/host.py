"""Where a finish touches the machine: container detection, the poweroff commands and the
provider, gathered in `FinishHost` so tests point each at a harmless stand-in.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from runspec.providers import Provider
from runspec.providers.persist import RETRY_BASE

COMMAND_TIMEOUT = 300.0
END_WINDOW = 1800.0
LEAST_WINDOW = 300.0
REAL_POWEROFF: tuple[tuple[str, ...], ...] = (("systemctl", "poweroff"), ("shutdown", "-h", "now"))
# Set by the test suite for every test (tests/fixtures_providers.py): the real poweroff
# commands are then refused, whatever container detection says about the machine.
NO_POWEROFF_ENV = "RUNSPEC_TEST_NO_POWEROFF"


@dataclass(frozen=True)
class FinishHost:
    """Where a finish touches the machine; the defaults are the real thing."""

    root: Path = Path("/")
    detect_virt: tuple[str, ...] = ("systemd-detect-virt", "--container")
    poweroff_commands: tuple[tuple[str, ...], ...] = REAL_POWEROFF
    env: Mapping[str, str] | None = None  # the provider adapters' environment (None: os.environ)
    provider: Provider | None = None  # a ready adapter instead of finish.provider's
    command_timeout: float = COMMAND_TIMEOUT
    # How long a stop or destroy keeps being retried until the provider confirms it when no run
    # deadline says (runspec.machine.endwindow: else the deadline plus the overrun, and at least
    # `least_window`), and the first pause between tries (doubled each time, Retry-After honoured).
    end_window: float = END_WINDOW
    least_window: float = LEAST_WINDOW
    retry_base: float = RETRY_BASE


def container_reason(host: FinishHost) -> str | None:
    """Why this looks like a container (where a poweroff ends no billing), or None."""
    virt = shutil.which(host.detect_virt[0]) if host.detect_virt else None
    if virt is not None:
        try:
            proc = subprocess.run(
                [virt, *host.detect_virt[1:]],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            proc = None
        if proc is not None and proc.returncode == 0 and proc.stdout.strip() not in ("", "none"):
            return f"systemd-detect-virt says {proc.stdout.strip()}"
    for marker in (".dockerenv", "run/.containerenv"):
        if (host.root / marker).exists():
            return f"/{marker} exists"
    try:
        environ = (host.root / "proc/1/environ").read_bytes()
    except OSError:
        environ = b""
    for entry in environ.split(b"\0"):
        if entry.startswith(b"container="):
            return f"PID 1 runs with {entry.decode(errors='replace')}"
    try:
        cgroup = (host.root / "proc/1/cgroup").read_text()
    except OSError:
        cgroup = ""
    for word in ("docker", "kubepods", "containerd", "lxc", "libpod"):
        if word in cgroup:
            return f"/proc/1/cgroup mentions {word}"
    return None
