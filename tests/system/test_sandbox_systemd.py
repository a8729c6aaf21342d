"""Least privilege under a real systemd (booted in a container), with the unit as shipped:

- the trainer the daemon starts runs in a sandboxed transient unit (umask 0077, a read-only
  system and homes, writes only to its own folders) whose environment holds no provider key
  and no Hub token (yolo9-t needs none), though the daemon's EnvironmentFile holds both;
- a spec that would write where the daemon's sandbox cannot is refused by the preflight with
  the fix, and the fix (the config's `writable:`, `runspec install`, a restart) works; the run
  then ends with its finish calling the provider's API from inside the sandbox (the local
  vast.ai stand-in on the host's loopback), with the key from the EnvironmentFile.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures_daemon import wait_until
from tests.fixtures_providers import StandIn, vast_answers_stopped
from tests.fixtures_system import REPO, Installed
from tests.system.walls import SECRETS, as_unit, probe_the_walls

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]

TRAIN = (
    "dataset:\n  synthetic: {train: 8, val: 4, imgsz: 64, classes: 3, seed: 0}\n"
    "train:\n  model: yolo9-t\n  epochs: EPOCHS\n  batch: 4\n  imgsz: 32\n  device: cpu\n"
    "  save_period: 1\n  args: {pretrained: false, workers: 0, eval_interval: 1}\n"
    "budget:\n  wall_clock: 15m\n"
    # The container's two cores are the suite's too: one OpenMP thread (tests/conftest.py).
    "env: {OMP_NUM_THREADS: 1}\n"
    "preflight: {matmul: false, collective: false, doctor: false, disk: 600MB}\n"
)


def _environ(inst: Installed, pid: int) -> dict[str, str]:
    raw = inst.container.sh(f"tr '\\0' '\\n' < /proc/{pid}/environ").stdout
    return dict(line.split("=", 1) for line in raw.splitlines() if "=" in line)


@pytest.mark.training
def test_the_trainer_unit_is_sandboxed_and_holds_no_secret(runspecd_container: Installed) -> None:
    inst, c = runspecd_container, runspecd_container.container
    env_file = inst.root / "etc/runspec/env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in SECRETS.items()) + "RUNSPEC_MARK=kept\n")
    env_file.chmod(0o600)
    # A login stored by `hf auth login`, where the unit's HF_TOKEN_PATH says.
    login = "/root/.cache/huggingface/token"
    c.sh(f"mkdir -p {Path(login).parent} && echo hf_storedlogin0123456789 > {login}")
    c.sh("systemctl restart runspecd")  # started at boot: it reads the file again
    # Another run's folders, there before this one: its record and its weights.
    (inst.state / "jobs/other").mkdir(parents=True)
    (inst.state / "jobs/other/notes.txt").write_text('{"name": "other-run-record"}\n')
    (inst.state / "runs/other/weights").mkdir(parents=True)
    (inst.state / "runs/other/weights/last.pt").write_text("other-run-weights\n")
    spec = "runspec: 1\nname: sbx\n" + TRAIN.replace("EPOCHS", "200") + "finish: {action: none}\n"
    inst.submit("sbx", spec)
    wait_until(lambda: inst.record("sbx").get("epoch", 0) >= 1, timeout=300)
    trainer = json.loads((inst.state / "jobs/sbx/trainer.json").read_text())
    unit, pid = trainer["unit"], trainer["identity"]["pid"]

    props = c.show(unit, "UMask", "NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp")
    assert props == {
        "UMask": "0077",
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "read-only",
        "PrivateTmp": "yes",
    }
    shown = c.sh(f"systemctl show {unit}").stdout
    assert not any(value in shown for value in SECRETS.values())

    env = _environ(inst, pid)
    assert [name for name in SECRETS if name in env] == []
    # The daemon's own environment reaches it, the unit's Environment= and the file's alike.
    assert env.get("RUNSPEC_MARK") == "kept"
    assert env.get("HF_HOME") == "/var/lib/runspec/cache/huggingface"

    def write(path: str) -> subprocess.CompletedProcess[str]:
        # A write from inside the trainer's own mount namespace, as the trainer would.
        return c.sh(f"nsenter -t {pid} -m sh -c 'echo x > \"$1\"' sh {path}", check=False)

    for outside in ("/etc/probe", "/usr/probe", "/root/probe", "/var/lib/runspec/jobs/sbx/probe"):
        denied = write(outside)
        assert denied.returncode != 0 and "Read-only file system" in denied.stderr, outside
    for inside in ("/var/lib/runspec/runs/sbx/probe", "/var/lib/runspec/jobs/sbx/control/probe"):
        assert write(inside).returncode == 0, inside
    probe_the_walls(inst, pid, "/var/lib/runspec/runs/sbx")
    # It works in its own run folder, not in the weights cache every run writes.
    assert c.sh(f"readlink /proc/{pid}/cwd").stdout.strip() == "/var/lib/runspec/runs/sbx"
    # Other runs' folders are not there for it, those made after it started included.
    (inst.state / "jobs/later").mkdir()
    (inst.state / "jobs/later/notes.txt").write_text('{"name": "later-run-record"}\n')
    for other in ("jobs/other/notes.txt", "runs/other/weights/last.pt", "jobs/later/notes.txt"):
        seen = as_unit(inst, pid, f"cat /var/lib/runspec/{other}")
        assert seen.returncode != 0 and "run-" not in seen.stdout, (other, seen.stdout)
    assert as_unit(inst, pid, "ls /var/lib/runspec/jobs").stdout.split() == ["sbx"]
    assert as_unit(inst, pid, "ls /var/lib/runspec/runs").stdout.split() == ["sbx"]
    # yolo9-t needs no token: the stored login is hidden from it (an empty, inaccessible node
    # in its place), not merely read-only.
    hidden = c.sh(f"nsenter -t {pid} -m cat {login}", check=False)
    assert "hf_storedlogin" not in hidden.stdout, hidden
    assert "hf_storedlogin" in c.sh(f"cat {login}").stdout  # still there for the daemon
    # What it wrote is its owner's alone.
    run_dir = inst.state / "runs/sbx"
    assert (run_dir.stat().st_mode & 0o777) == 0o700
    weights = sorted((run_dir / "weights").glob("*.pt"))
    assert weights and all(p.stat().st_mode & 0o077 == 0 for p in weights)


@pytest.mark.training
def test_a_folder_the_sandbox_cannot_write_is_refused_until_the_config_names_it(
    runspecd_container: Installed, standin: StandIn
) -> None:
    inst, c = runspecd_container, runspecd_container.container
    vast_answers_stopped(standin)
    env_file = inst.root / "etc/runspec/env"
    env_file.write_text(
        f"CONTAINER_ID=4242\nCONTAINER_API_KEY={SECRETS['CONTAINER_API_KEY']}\n"
        f"RUNSPEC_VAST_API={standin.url}\n"
    )
    env_file.chmod(0o600)
    c.sh("systemctl restart runspecd")  # started at boot: it reads the file again
    spec = "runspec: 1\nname: NAME\n" + TRAIN.replace("EPOCHS", "1") + "push: {dir: /srv/volume}\n"
    inst.submit("outside", spec.replace("NAME", "outside") + "finish: {action: none}\n")
    # Its logs cannot be pushed there either: it ends, but not soon. The refusal is enough.
    wait_until(lambda: inst.record("outside").get("termination"), timeout=300)
    refused = inst.record("outside")
    assert refused["termination"] == "failed-preflight", refused
    why = str(refused["why"])
    assert "sandbox cannot write push.dir /srv/volume" in why, why
    assert "writable: in /etc/runspec/runspecd.yaml" in why and "runspec install" in why, why

    # The fix, as the message says it.
    config = inst.root / "etc/runspec/runspecd.yaml"
    config.write_text(config.read_text() + "writable: [/srv/volume]\n")
    runspec = Path(sys.executable).with_name("runspec")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "runspec",
            "install",
            "--root",
            str(inst.root),
            "--exec",
            str(runspec),
        ],
        check=True,
        capture_output=True,
        timeout=60,
        cwd=REPO,
    )
    conf = inst.root / "etc/systemd/system/runspecd.service.d/writable.conf"
    assert 'ReadWritePaths="-/srv/volume"' in conf.read_text()
    c.sh("mkdir -p /srv/volume && systemctl daemon-reload && systemctl restart runspecd")
    inst.submit("inside", spec.replace("NAME", "inside") + "finish: {action: stop}\n")
    wait_until(lambda: inst.record("inside").get("status") == "finished", timeout=300)
    done = inst.record("inside")
    assert done["termination"] == "completed", done
    c.sh("test -s /srv/volume/inside/weights/last.pt")
    # The finish reached the provider's API from inside the sandbox, with the file's key.
    (stop,) = standin.made("PUT")
    assert stop.path == "/api/v0/instances/4242/"
    assert stop.header("Authorization") == f"Bearer {SECRETS['CONTAINER_API_KEY']}"
