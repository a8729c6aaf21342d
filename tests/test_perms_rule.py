"""One permission rule for every entry point (issue 18, item 6): `runspec run --state`,
`submit`, `daemon` and `install` refuse a state folder, inbox or config others can write, with
the daemon's one message, before writing anything through it."""

from __future__ import annotations

import os
from pathlib import Path

from tests.fixtures_daemon import runspec_cli, spec_text
from tests.fixtures_system import install

SAYS = "must not be writable by other users"


def _open_to_all(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o777)
    return folder


def test_run_refuses_a_world_writable_state_folder(tmp_path: Path) -> None:
    state = _open_to_all(tmp_path / "state")
    spec = tmp_path / "open.yaml"
    spec.write_text(spec_text("open"))
    out = runspec_cli("run", str(spec), "--state", str(state))
    assert out.returncode != 0 and SAYS in out.stderr, out.stderr
    assert list(state.iterdir()) == []


def test_submit_refuses_a_world_writable_inbox(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    inbox = _open_to_all(state / "inbox")
    spec = tmp_path / "open.yaml"
    spec.write_text(spec_text("open"))
    out = runspec_cli("submit", str(spec), "--state", str(state), "--inbox", str(inbox))
    assert out.returncode != 0 and SAYS in out.stderr, out.stderr
    assert list(inbox.iterdir()) == []


def test_install_refuses_a_world_writable_state_folder(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _open_to_all(root / "var/lib")
    out = install(root)
    assert out.returncode != 0 and SAYS in out.stderr, out.stderr
    assert not (root / "etc/systemd/system/runspecd.service").exists()
