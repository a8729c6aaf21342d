"""A throwaway systemd booted in a container (systemd-nspawn, host /usr, tmpfs root), driven
with nsenter. See /work/shared/notes/systemd-testing.md. Only root can do this.

Safety: poweroff is only ever run inside the container, through a guard that refuses unless
PID 1 there is systemd, systemd-detect-virt says systemd-nspawn and the hostname is ours.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

BOOT_TIMEOUT = 120.0  # a boot takes ~10 s alone; 60 s ran out once on a machine loaded twice over

GUARDED_POWEROFF = """\
set -eu
[ "$(cat /proc/1/comm)" = systemd ] || { echo "refusing: PID 1 is not systemd" >&2; exit 97; }
[ "$(systemd-detect-virt -c)" = systemd-nspawn ] || { echo "refusing: not in nspawn" >&2; exit 97; }
[ "$(hostname)" = "$1" ] || { echo "refusing: hostname is not $1" >&2; exit 97; }
exec systemctl poweroff --no-block
"""


def why_unavailable() -> str | None:
    """None when a container can be booted here; otherwise the reason, for the skip message."""
    if os.geteuid() != 0:
        return "booting systemd in a container needs root"
    for tool in ("systemd-nspawn", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install -y systemd-container)"
    if not Path("/sys/fs/cgroup/systemd").is_dir():
        return "no name=systemd cgroup hierarchy at /sys/fs/cgroup/systemd"
    return None


class Container:
    def __init__(self, workdir: Path, binds: list[tuple[Path, Path]], ro_binds: list[Path]) -> None:
        self.name = f"rs{uuid.uuid4().hex[:10]}"
        self.workdir = workdir
        self.binds = binds
        self.ro_binds = ro_binds
        self.journal = workdir / "journal"
        self.console = workdir / "console.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.leader: int | None = None
        self._cgroups = [Path(f"/sys/fs/cgroup/{h}/{self.name}") for h in ("systemd", "unified")]

    def boot(self) -> None:
        self.journal.mkdir(parents=True, exist_ok=True)
        for cg in self._cgroups:
            if cg.parent.is_dir():
                cg.mkdir(exist_ok=True)
        args = [
            "systemd-nspawn", "-D", "/", "--volatile=yes", "--boot", "--register=no",
            "--keep-unit", f"--machine={self.name}", f"--hostname={self.name}",
            "--console=pipe", "--link-journal=no", "-q",
            f"--bind={self.journal}:/var/log/journal",
        ]  # fmt: skip
        args += [f"--bind-ro={p}" for p in self.ro_binds]
        args += [f"--bind={src}:{dst}" for src, dst in self.binds]
        # With an empty /etc, first boot enables whatever the host's presets say: keep the
        # container to the units under test (it shares the host's network).
        masked = ("systemd-firstboot", "systemd-networkd", "postgresql", "cron", "ssh")
        args += [f"systemd.mask={unit}.service" for unit in masked]
        # nspawn with --keep-unit makes its sub-cgroups where it stands: in our own cgroup.
        procs = " ; ".join(f"echo $$ > {cg}/cgroup.procs" for cg in self._cgroups if cg.is_dir())
        with self.console.open("wb") as out:
            self.proc = subprocess.Popen(
                ["sh", "-c", f'{procs} ; exec "$@"', "nspawn", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        end = time.monotonic() + BOOT_TIMEOUT
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nspawn exited {self.proc.returncode}: {self.console_text()}")
            if self.leader is None:
                self.leader = self._find_leader()
            if self.leader is not None:
                state = self.sh("systemctl is-system-running", check=False).stdout.strip()
                if state in ("running", "degraded"):
                    return
            time.sleep(0.1)
        raise RuntimeError(f"the container did not boot in {BOOT_TIMEOUT}s: {self.console_text()}")

    def _find_leader(self) -> int | None:
        assert self.proc is not None
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        try:
            pids = children.read_text().split()
        except FileNotFoundError:
            return None
        return int(pids[0]) if pids else None

    def console_text(self) -> str:
        return self.console.read_text(errors="replace")[-4000:]

    def sh(
        self, script: str, *, check: bool = True, timeout: float = 120.0, args: tuple[str, ...] = ()
    ) -> subprocess.CompletedProcess[str]:
        assert self.leader is not None
        out = subprocess.run(
            ["nsenter", "-t", str(self.leader), "-a", "sh", "-c", script, "sh", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and out.returncode != 0:
            # What systemd said about it: a unit that failed to start says why only there.
            journal = self.journal_text()[-3000:] if script.startswith("systemctl") else ""
            raise AssertionError(
                f"{script!r} exited {out.returncode}: {out.stdout}{out.stderr}{journal}"
            )
        return out

    def show(self, unit: str, *props: str) -> dict[str, str]:
        out = self.sh(f"systemctl show {unit} " + " ".join(f"-p {p}" for p in props)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def journal_text(
        self, unit: str | None = None, *, priority: str | None = None, output: str = ""
    ) -> str:
        cmd = ["journalctl", "-D", str(self.journal), "--no-pager"]
        cmd += ["-o", output or "short-monotonic"]
        if unit:
            cmd += ["-u", unit]
        if priority:
            cmd += ["-p", priority]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False).stdout

    def poweroff_inside(self) -> None:
        self.sh(GUARDED_POWEROFF, args=(self.name,))

    def wait_exit(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.poweroff_inside()
                self.proc.wait(timeout=120)
            except (AssertionError, subprocess.TimeoutExpired):
                # nspawn's own --kill-signal ends the container's init with it.
                self.proc.terminate()  # our own nspawn, by its Popen handle
                self.proc.wait(timeout=60)
        end = time.monotonic() + 30
        for cg in self._cgroups:
            for child in [*sorted((p for p in cg.rglob("*") if p.is_dir()), reverse=True), cg]:
                while child.is_dir():
                    try:
                        child.rmdir()
                    except OSError:
                        if time.monotonic() > end:
                            print(f"warning: could not remove {child}", file=sys.stderr)
                            break
                        time.sleep(0.2)


def python_prefix() -> Path:
    """The interpreter install the venv points at; it must be visible inside the container."""
    return Path(os.path.realpath(sys.executable)).parent.parent
