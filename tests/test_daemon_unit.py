"""The unit file and `runspec install`: systemd's own verifier must accept what we install."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from runspec.daemon.config import DEFAULT_CONFIG_TEXT, load_config
from tests.fixtures_daemon import REPO
from tests.fixtures_system import install

UNIT = REPO / "systemd" / "runspecd.service"


def test_every_setting_in_the_unit_is_commented() -> None:
    # A comment may cover a small group of settings (Wants= and After=) right below it.
    lines = UNIT.read_text().splitlines()
    for i, line in enumerate(lines):
        if "=" in line and not line.startswith("#"):
            j = i - 1
            while j > 0 and "=" in lines[j] and not lines[j].startswith("#"):
                j -= 1
            assert lines[j].startswith("#") and i - j <= 2, f"uncommented setting: {line}"


def test_install_puts_files_in_place_and_systemd_verifies_the_unit(tmp_path: Path) -> None:
    out = install(tmp_path)
    assert out.returncode == 0, out.stderr
    unit = tmp_path / "etc/systemd/system/runspecd.service"
    text = unit.read_text()
    # The unit goes in as shipped (its sandbox is what was scored); this machine's program
    # is a drop-in.
    assert text == UNIT.read_text()
    exec_conf = (tmp_path / "etc/systemd/system/runspecd.service.d/exec.conf").read_text()
    assert f"ExecStart={Path(sys.executable).with_name('runspec')} daemon" in exec_conf
    expected = ["Type=notify", "NotifyAccess=main", "WatchdogSec=", "Restart=on-failure"]
    expected += ["KillMode=process", "EnvironmentFile=-/etc/runspec/env", "ExecReload="]
    for setting in expected:
        assert setting in text
    for folder in ("var/lib/runspec", "var/lib/runspec/inbox"):
        assert stat.S_IMODE((tmp_path / folder).stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "etc/runspec/env").stat().st_mode) == 0o600
    assert (tmp_path / "etc/runspec/runspecd.yaml").exists()
    verify = subprocess.run(
        ["systemd-analyze", "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "notice"},
    )
    assert verify.returncode == 0, verify.stderr
    assert verify.stderr == ""


def test_installed_default_config_loads_and_install_keeps_an_edited_one(tmp_path: Path) -> None:
    assert install(tmp_path).returncode == 0
    config = tmp_path / "etc/runspec/runspecd.yaml"
    config.write_text("hourly_cost: 2.5\n")
    assert install(tmp_path).returncode == 0
    assert config.read_text() == "hourly_cost: 2.5\n"
    config.write_text(DEFAULT_CONFIG_TEXT)
    cfg = load_config(config, state=tmp_path / "s")
    assert cfg.inbox == tmp_path / "s" / "inbox"
    assert cfg.idle_finish is None


def test_a_runspec_installed_in_tmp_is_bound_into_the_units_private_tmp() -> None:
    """The unit's PrivateTmp= hides the shared /tmp: a runspec cloned and installed there
    (a throwaway checkout, a test's) would not even start. The drop-in binds it in, read-only."""
    from runspec.commands.install import SHIPPED_EXEC, exec_dropin

    text = exec_dropin(Path("/tmp/clone/.venv/bin/runspec"))
    assert text is not None
    assert "ExecStart=/tmp/clone/.venv/bin/runspec daemon" in text
    binds = text.splitlines()[-1]
    assert binds.startswith("BindReadOnlyPaths=")
    assert '"-/tmp/clone/.venv"' in binds.removeprefix("BindReadOnlyPaths=").split()
    # Where nothing lies in /tmp, the shipped unit needs no drop-in at all.
    if not any(str(p).startswith(("/tmp/", "/var/tmp/")) for p in (Path(sys.prefix), REPO)):
        assert exec_dropin(SHIPPED_EXEC) is None
