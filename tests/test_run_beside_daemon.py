"""`runspec run` respects a daemon on the same state folder: one trainer per machine.
A real daemon training a real run, a second spec queued, and the real `runspec run`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures_daemon import REPO, DaemonProc, drop, wait_until
from tests.test_daemon_runs import TRAIN_BOUND, _record, tiny

pytestmark = pytest.mark.training


def _run(spec: Path, state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runspec", "run", str(spec), "--state", str(state)],
        capture_output=True, text=True, timeout=120, check=False, cwd=REPO,
    )  # fmt: skip


@pytest.mark.timeout(900)
def test_runspec_run_refuses_to_train_beside_the_daemon(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon()
    daemon.start()
    daemon.wait_ready()
    drop(daemon.inbox, "first.yaml", tiny("first", 30))
    drop(daemon.inbox, "queued.yaml", tiny("queued", 2))
    wait_until(
        lambda: (
            _record(daemon.state, "first").get("status") == "training"
            and _record(daemon.state, "queued").get("status") == "queued"
        ),
        timeout=TRAIN_BOUND,
        what="one run training, one queued",
    )
    pid = daemon.proc.pid if daemon.proc is not None else 0
    for name in ("queued", "fresh"):
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(tiny(name, 2))
        refused = _run(spec, daemon.state)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"runspecd (pid {pid}) drives this machine" in refused.stderr
        assert f"runspec submit {spec}" in refused.stderr
    # Nothing of theirs was touched: no trainer of its own, the queue as it was.
    assert _record(daemon.state, "queued").get("status") == "queued"
    assert not (daemon.state / "jobs" / "fresh").exists()
    assert not (daemon.state / "runs" / "queued").exists()
    # Leave nothing running: the daemon's trainer stops at its next epoch.
    for name in ("first", "queued"):
        subprocess.run(
            [sys.executable, "-m", "runspec", "cancel", name, "--state", str(daemon.state)],
            capture_output=True, timeout=60, check=False, cwd=REPO,
        )  # fmt: skip
    wait_until(
        lambda: all(
            _record(daemon.state, n).get("status") == "finished" for n in ("first", "queued")
        ),
        timeout=TRAIN_BOUND,
        what="both runs cancelled",
    )
