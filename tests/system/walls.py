"""What a hostile trainer or preflight child would try, from inside its own unit: from its
mount namespace and with its credentials (uid 0, no capability, as its unit's empty bounding
set leaves it)."""

from __future__ import annotations

import subprocess

from tests.fixtures_system import Installed

SECRETS = {
    "CONTAINER_API_KEY": "vast-key-sandbox-system-test",
    "RUNPOD_API_KEY": "runpod-key-sandbox-system-test",
    "HF_TOKEN": "hf_sandboxsystemtest0123456789",
}


def as_unit(inst: Installed, pid: int, command: str) -> subprocess.CompletedProcess[str]:
    drop = "setpriv --bounding-set=-all --inh-caps=-all --no-new-privs --"
    return inst.container.sh(f"nsenter -t {pid} -m {drop} sh -c '{command}'", check=False)


def probe_the_walls(inst: Installed, pid: int, own_folder: str) -> None:
    """The env file, the daemon's environment, two remounts and writes outside are refused;
    the same write into `own_folder` goes through (the probe itself works)."""
    c = inst.container
    daemon = c.show("runspecd.service", "MainPID")["MainPID"]
    assert c.sh(f"grep CapBnd /proc/{pid}/status").stdout.split()[1] == "0000000000000000"
    for probe in (
        "cat /etc/runspec/env",  # the provider keys
        f"cat /proc/{daemon}/environ",  # the same keys, in the daemon's memory
        "mount -o remount,rw,bind /var/lib/runspec",
        "mount -o remount,rw,bind /etc",
        "echo x > /var/lib/runspec/inbox/planted.yaml",
        "echo x > /etc/planted",
    ):
        out = as_unit(inst, pid, probe)
        assert out.returncode != 0, (probe, out.stdout)
        assert not any(value in out.stdout for value in SECRETS.values()), probe
    assert not (inst.state / "inbox" / "planted.yaml").exists()
    assert as_unit(inst, pid, f"echo x > {own_folder}/probe-from-inside").returncode == 0
