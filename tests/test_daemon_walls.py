"""The daemon's environment (every provider key) is out of reach of its capability-less
children: under runspecd.service all of them are uid 0 without capabilities, so only the
daemon being undumpable keeps /proc/PID/environ closed (issue 18, item 2)."""

from __future__ import annotations

import subprocess

from tests.fixtures_daemon import DaemonProc
from tests.test_inbox_settle import NO_CAPS

KEY = "runpod-key-0123456789abcdef"


def test_a_capability_less_process_cannot_read_the_daemons_environment(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start(wrap=NO_CAPS, env={"RUNPOD_API_KEY": KEY})
    daemon.wait_ready()
    assert daemon.proc is not None
    probe = subprocess.run(
        [*NO_CAPS, "cat", f"/proc/{daemon.proc.pid}/environ"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert KEY.encode() not in probe.stdout
    assert probe.returncode != 0 and b"Permission denied" in probe.stderr
