"""Hints keep `--resume` (issue 38): `runspec run SPEC --resume` beside a daemon is refused with
the submit that queues the same thing, `runspec submit SPEC --resume`, not a plain submit that
the finished name then refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from runspec.clock import SYSTEM
from runspec.run.accept import accept
from runspec.run.beside import refuse_beside_daemon
from runspec.spec.loader import load_spec
from runspec.store.owner import DaemonRunning, take_daemon_lock
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore, RunStatus
from tests.fixtures_daemon import spec_text


def test_the_submit_a_refused_resume_suggests_keeps_resume(tmp_path: Path) -> None:
    state = tmp_path / "state"
    spec_file = tmp_path / "my run.yaml"
    spec_file.write_text(spec_text("held"))
    spec = load_spec(spec_file)
    record = accept(spec, state, {"via": "test"}, SYSTEM)
    RecordStore(state).transition(record, RunStatus.PREFLIGHT, "started")  # the daemon's
    lock = take_daemon_lock(StateLayout(state))
    try:
        with pytest.raises(DaemonRunning) as resumed:
            refuse_beside_daemon(spec, state, spec_file, resume=True)
        with pytest.raises(DaemonRunning) as plain:
            refuse_beside_daemon(spec, state, spec_file)
    finally:
        lock.release()
    quoted = f"'{spec_file}'"  # pasteable as printed: the space is quoted
    assert f"`runspec submit {quoted} --resume --state {state}`" in str(resumed.value)
    assert f"`runspec submit {quoted} --state {state}`" in str(plain.value)
