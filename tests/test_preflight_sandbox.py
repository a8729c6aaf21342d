"""The preflight's `writable` check: a real write in each folder the run will write, and, when
one is refused, whose refusal it is. The sandbox's own case, in a real systemd, is in
tests/system/test_sandbox_systemd.py; here the mount tables are as /proc shows them."""

from __future__ import annotations

from pathlib import Path

from runspec.checkresult import CheckStatus
from runspec.preflight.sandbox import (
    _private_tmp,
    _sandboxed,
    mount_of,
    parse_mounts,
    writable_check,
)
from runspec.spec.loader import load_spec_text
from runspec.store.paths import RunPaths

# runspecd's view (ProtectSystem=strict, StateDirectory=, PrivateTmp=) and PID 1's.
OURS = """\
25 1 8:1 / / ro,relatime shared:1 - ext4 /dev/sda1 rw
30 25 8:1 /var/lib/runspec /var/lib/runspec rw,relatime shared:2 - ext4 /dev/sda1 rw
31 25 8:1 /tmp/systemd-private-ab12-runspecd.service-Xy/tmp /tmp rw,nosuid - ext4 /dev/sda1 rw
32 25 8:17 / /mnt/ro\\040media ro,relatime - ext4 /dev/sdb1 ro
"""
PID1 = """\
25 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
32 25 8:17 / /mnt/ro\\040media ro,relatime - ext4 /dev/sdb1 ro
"""


def test_whose_read_only_folder_it_is() -> None:
    ours, pid1 = parse_mounts(OURS), parse_mounts(PID1)
    mount = mount_of(Path("/mnt/ro media/x"), ours)
    assert mount is not None and mount.point == Path("/mnt/ro media")
    # Read-only here, writable for PID 1: the sandbox's doing; its fix is the config.
    assert _sandboxed(Path("/mnt/volume/pushed"), ours, pid1)
    assert not _sandboxed(Path("/var/lib/runspec/runs"), ours, pid1)
    # Read-only for everyone: the machine's own read-only disk, not the sandbox.
    assert not _sandboxed(Path("/mnt/ro media/x"), ours, pid1)
    assert not _sandboxed(Path("/mnt/volume"), ours, None)  # cannot tell: no claim
    assert _private_tmp(Path("/tmp/runs"), ours)
    assert not _private_tmp(Path("/tmp/runs"), pid1)
    assert not _private_tmp(Path("/var/lib/runspec/runs"), ours)


def _spec(extra: str) -> str:
    return (
        "runspec: 1\nname: w\ndataset: {synthetic: {}}\n"
        "train: {model: yolo9-t, epochs: 1, device: cpu}\nbudget: {wall_clock: 10m}\n" + extra
    )


def test_writable_folders_pass_and_a_folder_that_cannot_be_made_fails(tmp_path: Path) -> None:
    volume = tmp_path / "volume"
    spec = load_spec_text(
        _spec(f"output: {{project: {tmp_path / 'project'}}}\npush: {{dir: {volume}}}\n"), "w.yaml"
    )
    paths = RunPaths.decide(spec, tmp_path / "state")
    result = writable_check(spec, paths)
    assert result.status is CheckStatus.PASS, result
    assert str(volume) in result.message
    # The probe creates nothing: the folders are the run's to make, and a check leaves none.
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    volume.mkdir()
    assert writable_check(spec, paths).status is CheckStatus.PASS
    assert list(volume.iterdir()) == []  # the probe's file is gone

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    spec = load_spec_text(_spec(f"push: {{dir: {blocker / 'pushed'}}}\n"), "w.yaml")
    result = writable_check(spec, RunPaths.decide(spec, tmp_path / "state"))
    assert result.status is CheckStatus.FAIL
    assert f"cannot write push.dir {blocker / 'pushed'}" in result.message
