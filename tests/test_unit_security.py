"""runspecd's sandbox on paper: systemd's own scorer rates the shipped unit (and the unit as
installed, drop-ins included) 2.5 or less, and `runspec install` turns the config's folders
into the drop-in that lets the daemon write them, and nothing else."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from runspec.daemon.config import ConfigError, load_config
from tests.fixtures_daemon import REPO
from tests.fixtures_system import install

UNIT = REPO / "systemd" / "runspecd.service"
MOST_EXPOSED = 2.5


def _exposure(unit: Path, name: str = "runspecd.service") -> float:
    if shutil.which("systemd-analyze") is None:
        reason = "systemd-analyze is not installed (apt-get install -y systemd)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"the unit's score must be checked in CI: {reason}")
        pytest.skip(reason)
    out = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    score = re.compile(rf"Overall exposure level for {re.escape(name)}: (\d+\.\d+)")
    found = score.search(out.stdout + out.stderr)
    assert found is not None, out.stdout + out.stderr
    return float(found.group(1))


def _install(root: Path) -> None:
    installed = install(root)
    assert installed.returncode == 0, installed.stderr


def test_the_shipped_unit_scores_at_most_2_5() -> None:
    assert _exposure(UNIT) <= MOST_EXPOSED


def test_install_writes_the_configs_folders_into_a_dropin_and_the_score_holds(
    tmp_path: Path,
) -> None:
    _install(tmp_path)
    config = tmp_path / "etc/runspec/runspecd.yaml"
    # runs: and data: lie inside writable: folders already; inbox: inside the state folder.
    config.write_text(
        "runs: /mnt/volume/runs\ndata: /data/sets\ninbox: /var/lib/runspec/in\n"
        "writable: [/mnt/volume, /data, '/srv/with space']\n"
    )
    _install(tmp_path)
    dropins = tmp_path / "etc/systemd/system/runspecd.service.d"
    lines = (dropins / "writable.conf").read_text().splitlines()
    assert 'ReadWritePaths="-/mnt/volume" "-/data" "-/srv/with space"' in lines
    assert (tmp_path / "etc/systemd/system/runspecd.service").read_text() == UNIT.read_text()
    assert _exposure(tmp_path / "etc/systemd/system/runspecd.service") <= MOST_EXPOSED
    # An emptied config empties the drop-in: nothing stays writable by accident.
    config.write_text("hourly_cost: 1\n")
    _install(tmp_path)
    assert "ReadWritePaths" not in (dropins / "writable.conf").read_text()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("writable: /mnt/volume\n", "writable must be a list"),
        ("writable: [mnt/volume]\n", "is not an absolute path"),
        ("writeable: [/mnt/volume]\n", "unknown key 'writeable'"),
    ],
)
def test_the_writable_key_is_checked(tmp_path: Path, text: str, says: str) -> None:
    config = tmp_path / "runspecd.yaml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=says):
        load_config(config)


TRAINER_MOST_EXPOSED = 3.0


def test_the_trainers_transient_unit_scores_at_most_3_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trainer's unit as systemd-run makes it (every --property it passes), scored the
    same way as runspecd's: written out as a unit file with those settings."""
    from runspec.spec.loader import load_spec_text
    from runspec.store.paths import RunPaths
    from runspec.trainer import trainerunit
    from runspec.trainer.control import TrainJob

    monkeypatch.setattr(trainerunit.os, "geteuid", lambda: 0)
    state = Path("/var/lib/runspec")
    paths = RunPaths(state=state, name="t", project=state / "runs", data_root=state / "data")
    spec = load_spec_text(
        "runspec: 1\nname: t\ndataset: {path: /srv/data/data.yaml}\n"
        "train: {model: yolo9-t, epochs: 1, device: cpu}\nbudget: {wall_clock: 1h}\n",
        "t.yaml",
    )
    job = TrainJob.from_spec(spec, paths, Path("/srv/data/data.yaml"))
    cmd = trainerunit.systemd_run_command(job, paths, ["/bin/true"], needs_token=False)
    props = [arg.removeprefix("--property=") for arg in cmd if arg.startswith("--property=")]
    unit = tmp_path / "runspec-train-t.service"
    unit.write_text("[Service]\nExecStart=/bin/true\n" + "".join(f"{p}\n" for p in props))
    score = _exposure(unit, "runspec-train-t.service")
    assert score <= TRAINER_MOST_EXPOSED, unit.read_text()


def test_the_preflight_childs_transient_unit_scores_at_most_3_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The preflight's child gets the trainer's walls (issue 18): its unit, scored alike."""
    from runspec.preflight import childlaunch
    from runspec.spec.loader import load_spec_text
    from runspec.store.paths import RunPaths
    from runspec.trainer import trainerunit

    monkeypatch.setattr(trainerunit.os, "geteuid", lambda: 0)
    state = tmp_path / "var/lib/runspec"
    paths = RunPaths(state=state, name="p", project=state / "runs", data_root=state / "data")
    spec = load_spec_text(
        "runspec: 1\nname: p\ndataset: {synthetic: {}}\n"
        "train: {model: yolo9-t, epochs: 1, device: cpu}\nbudget: {wall_clock: 1h}\n",
        "p.yaml",
    )
    cmd = childlaunch.unit_command(spec, paths, ["/bin/true"], 60.0)
    props = [arg.removeprefix("--property=") for arg in cmd if arg.startswith("--property=")]
    assert "CapabilityBoundingSet=" in props and "ProtectSystem=strict" in props, props
    unit = tmp_path / "runspec-preflight-p.service"
    unit.write_text("[Service]\nExecStart=/bin/true\n" + "".join(f"{p}\n" for p in props))
    score = _exposure(unit, "runspec-preflight-p.service")
    assert score <= TRAINER_MOST_EXPOSED, unit.read_text()
