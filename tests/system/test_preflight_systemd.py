"""The preflight's child under a real systemd (booted in a container), with runspecd's unit
as shipped: a transient unit of its own behind the trainer's walls (issue 18). From inside it,
reading /etc/runspec/env or the daemon's environment, a remount, and a write outside its
folders are refused; it holds no provider key, and the Hub token only by its pipe.

The child is held in its checks by a Hub that accepts and never answers (the dataset's size
is asked for), long enough to be probed."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from tests.fixtures_daemon import wait_until
from tests.fixtures_system import Installed
from tests.system.walls import SECRETS, probe_the_walls

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

SPEC = (
    "runspec: 1\nname: pfwall\n"
    "dataset:\n  hub: {repo: owner/sets, file: data.tar.gz}\n  data: d/data.yaml\n"
    "train: {model: yolo9-t, epochs: 1, batch: 4, imgsz: 32, device: cpu, "
    "args: {pretrained: false, workers: 0}}\n"
    "budget: {wall_clock: 15m}\n"
    "env: {OMP_NUM_THREADS: 1}\n"
    "preflight: {matmul: false, collective: false, doctor: false, disk: 100MB}\n"
    "finish: {action: none}\n"
)


@pytest.fixture
def silent_hub() -> Iterator[tuple[str, list[bytes]]]:
    """An endpoint that takes connections, keeps what the client sent, never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    heard: list[bytes] = []
    done = threading.Event()

    def hold() -> None:
        server.settimeout(0.2)
        while not done.is_set():
            try:
                conn = server.accept()[0]
            except TimeoutError:
                continue
            held.append(conn)
            conn.settimeout(2.0)
            try:
                heard.append(conn.recv(65536))  # the request's head: its headers
            except OSError:
                continue

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", heard
    done.set()
    thread.join(timeout=5)
    for conn in held:
        conn.close()
    server.close()


def _preflight_unit(inst: Installed) -> tuple[str, int] | None:
    out = inst.container.sh(
        "systemctl list-units 'runspec-preflight-*' --plain --no-legend", check=False
    ).stdout
    for line in out.splitlines():
        unit = line.split()[0]
        pid = int(inst.container.show(unit, "MainPID")["MainPID"] or 0)
        if pid > 0:
            return unit, pid
    return None


def _environ(inst: Installed, pid: int) -> str:
    return inst.container.sh(f"tr '\\0' '\\n' < /proc/{pid}/environ", check=False).stdout


def test_the_preflight_child_runs_behind_the_trainers_walls(
    runspecd_container: Installed, silent_hub: tuple[str, list[bytes]]
) -> None:
    inst, c = runspecd_container, runspecd_container.container
    hub_url, heard = silent_hub
    env_file = inst.root / "etc/runspec/env"
    lines = [f"{k}={v}" for k, v in SECRETS.items()] + [f"HF_ENDPOINT={hub_url}"]
    env_file.write_text("\n".join(lines) + "\n")
    env_file.chmod(0o600)
    c.sh("systemctl restart runspecd")  # started at boot: it reads the file again
    inst.submit("pfwall", SPEC)
    found: list[tuple[str, int]] = []

    def started() -> bool:
        assert not inst.record("pfwall").get("termination"), inst.record("pfwall")
        unit = _preflight_unit(inst)
        # Past the token pipe's exec: the main pid is the preflight's own.
        if (
            unit is not None
            and "runspec.preflight"
            in c.sh(f"tr '\\0' ' ' < /proc/{unit[1]}/cmdline", check=False).stdout.split(
                "runspec.trainer.tokenpipe"
            )[-1]
        ):
            found.append(unit)
            return True
        return False

    wait_until(started, timeout=240)
    unit, pid = found[-1]
    props = c.show(unit, "CapabilityBoundingSet", "ProtectSystem", "NoNewPrivileges", "UMask")
    assert props["ProtectSystem"] == "strict" and props["NoNewPrivileges"] == "yes", props
    assert props["CapabilityBoundingSet"] == "" and props["UMask"] == "0077", props
    shown = c.sh(f"systemctl show {unit}").stdout
    assert not any(value in shown for value in SECRETS.values())  # not even the token
    # Its environment: unreadable once its walls stand (not dumpable), else without a key.
    env = _environ(inst, pid)
    assert SECRETS["CONTAINER_API_KEY"] not in env and SECRETS["RUNPOD_API_KEY"] not in env
    # It asks the Hub with the token, which came by the pipe (not a unit property, above).
    token = SECRETS["HF_TOKEN"].encode()
    wait_until(lambda: any(token in got for got in heard), timeout=120)
    probe_the_walls(inst, pid, "/var/lib/runspec/runs/pfwall")
    # The jobs folder is read-only to it, its own included.
    own_job = as_written(inst, pid, "/var/lib/runspec/jobs/pfwall/probe")
    assert own_job.returncode != 0 and "Read-only file system" in own_job.stderr
    # The silent Hub is the check's to time out: the run ends, its preflight said.
    wait_until(lambda: inst.record("pfwall").get("termination"), timeout=240)
    end = time.monotonic() + 60
    while _preflight_unit(inst) is not None and time.monotonic() < end:
        time.sleep(0.5)
    assert _preflight_unit(inst) is None  # nothing of it is left running


def as_written(inst: Installed, pid: int, path: str) -> subprocess.CompletedProcess[str]:
    return inst.container.sh(f"nsenter -t {pid} -m sh -c 'echo x > \"$1\"' sh {path}", check=False)
