"""The preflight's child outside systemd (`runspec run` or `runspec preflight` as root in a
container): it walls itself in before it loads torch. No capability (so no remount, no ptrace
of its launcher), no new privileges, not dumpable, and the inbox and /etc/runspec covered in
a mount namespace of its own: uid 0 reads root's 0600 files without any capability, so only
not seeing them keeps the keys out of reach (issue 18). Under systemd its unit does this:
tests/system/test_preflight_systemd.py."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from runspec.preflight.childlaunch import start_child
from runspec.spec.loader import load_spec
from runspec.store.paths import RunPaths
from tests.test_inbox_settle import NO_CAPS

pytestmark = pytest.mark.timeout(300)


def _status(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


@pytest.mark.skipif(os.geteuid() != 0, reason="the walls a root launcher's child puts up")
def test_the_preflight_child_walls_itself_in_before_its_checks(tmp_path: Path) -> None:
    spec_file = tmp_path / "walls.yaml"
    spec_file.write_text(
        "runspec: 1\nname: walls\ndataset:\n  synthetic: {}\nbudget:\n  wall_clock: 10m\n"
        "train: {model: yolo9-t, device: cpu, epochs: 1}\n"
        "preflight: {matmul: false, collective: false, doctor: false}\n"
    )
    state = tmp_path / "state"
    (state / "inbox").mkdir(parents=True)
    (state / "inbox" / "planted.yaml").write_text("a spec the child must not see\n")
    spec = load_spec(spec_file)
    paths = RunPaths.for_spec(spec, state)
    args = ["--spec", str(spec_file), "--state", str(state), "--phase", "machine", "--json"]
    child = start_child(spec, paths, args, tmp_path, 240.0, accepted=False)
    pid = child.proc.pid
    try:
        end = time.monotonic() + 120
        while _status(pid).get("NoNewPrivs", "0").strip() != "1":  # the last wall put up
            assert time.monotonic() < end and child.proc.poll() is None, child.proc.communicate()
            time.sleep(0.05)
        status = _status(pid)
        for caps in ("CapBnd", "CapEff", "CapPrm", "CapInh", "CapAmb"):
            assert int(status[caps], 16) == 0, (caps, status[caps])
        # Its view of the inbox is an empty folder; ours still holds the planted spec.
        assert os.listdir(f"/proc/{pid}/root{state}/inbox") == []
        assert (state / "inbox" / "planted.yaml").exists()
        # Not dumpable: a capability-less process of the same uid cannot read its environment.
        probe = subprocess.run(
            [*NO_CAPS, "cat", f"/proc/{pid}/environ"], capture_output=True, timeout=30, check=False
        )
        assert probe.returncode != 0 and b"Permission denied" in probe.stderr
    finally:
        out, err = child.proc.communicate(timeout=240)
    # Walled in, it still ran its checks.
    report = json.loads(out)
    assert {c["name"] for c in report["checks"]} >= {"torch", "writable", "disk"}, err
