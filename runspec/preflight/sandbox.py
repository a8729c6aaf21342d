"""Can the run write where its spec says? Refused here, with the fix, rather than mid-run.

runspecd's unit makes the whole file system read-only but for the state folder and the folders
its config names under `writable:` (systemd/runspecd.service). A spec that puts its run folder
(output.project), its data (dataset.extract_to), its Hub cache (env.HF_HOME) or its pushed
copies (push.dir) elsewhere would fail where it first writes there: after the download, or at
the first push an hour in. Each such folder is made (the run would make it anyway) and a file
is written in it and removed. A read-only answer where PID 1 sees the same folder writable is
the sandbox's, and the fix is the config; anything else is the machine's own.
"""

from __future__ import annotations

import errno
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runspec.checkresult import CheckResult, failed, passed
from runspec.dataset.staging import hf_home_for
from runspec.spec.model import Spec
from runspec.store.paths import CONFIG_FILE, RunPaths

DEFAULT_CONFIG = CONFIG_FILE
OURS = Path("/proc/self/mountinfo")
PID1 = Path("/proc/1/mountinfo")
SHARED_TMP = (Path("/tmp"), Path("/var/tmp"))


@dataclass(frozen=True)
class Mount:
    point: Path
    root: str  # what of its file system is mounted there: a private /tmp is a subfolder
    read_only: bool


def parse_mounts(text: str) -> list[Mount]:
    """/proc/PID/mountinfo: the mount's root is field 4, its point 5, its options 6."""
    mounts = []
    for line in text.splitlines():
        fields = line.split(" - ", 1)[0].split()
        if len(fields) < 6:
            continue
        point = Path(fields[4].replace("\\040", " "))
        mounts.append(Mount(point, fields[3], "ro" in fields[5].split(",")))
    return mounts


def mount_of(path: Path, mounts: list[Mount]) -> Mount | None:
    """The mount `path` is on: the deepest mount point above it, the last one stacked there."""
    best: Mount | None = None
    for mount in mounts:
        inside = path == mount.point or mount.point in path.parents
        if inside and (best is None or len(mount.point.parts) >= len(best.point.parts)):
            best = mount
    return best


def _read(path: Path) -> list[Mount] | None:
    try:
        return parse_mounts(path.read_text())
    except OSError:
        return None


def write_targets(spec: Spec, paths: RunPaths) -> list[tuple[str, Path]]:
    """(what, folder) for each folder the daemon writes for this spec."""
    found = [("the run folder (output.project)", paths.project)]
    if spec.dataset.path is None:
        found.append(("the data (dataset.extract_to)", paths.data_root))
    if spec.dataset.hub is not None:
        found.append(("the Hub cache (HF_HOME)", hf_home_for(spec)))
    if spec.push is not None and spec.push.dir is not None:
        found.append(("push.dir", paths.resolve(spec.push.dir)))
    return [(what, folder.absolute()) for what, folder in found]


def _probe(folder: Path) -> OSError | None:
    """Whether the run could write `folder`, creating nothing that stays: a folder not there
    yet is made by the run in the nearest folder above it that is, so that one is tried."""
    here = folder
    while not here.exists() and here.parent != here:
        here = here.parent
    try:
        fd, name = tempfile.mkstemp(prefix=".runspec-probe-", dir=here)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return exc
    return None


def _private_tmp(folder: Path, ours: list[Mount] | None) -> bool:
    """Is `folder` in a /tmp of this process's own (runspecd's PrivateTmp=)?"""
    if ours is None or not any(folder.is_relative_to(tmp) for tmp in SHARED_TMP):
        return False
    mount = mount_of(folder, ours)
    return mount is not None and "systemd-private-" in mount.root


def _sandboxed(folder: Path, ours: list[Mount] | None, pid1: list[Mount] | None) -> bool:
    """Read-only here, writable for PID 1: our own mount namespace made it so."""
    if ours is None or pid1 is None:
        return False
    here, there = mount_of(folder, ours), mount_of(folder, pid1)
    return here is not None and here.read_only and there is not None and not there.read_only


def _fix_writable(folder: Path) -> str:
    return (
        f"add {folder} (or a folder above it) to writable: in {DEFAULT_CONFIG}, then "
        "`runspec install` and `systemctl daemon-reload && systemctl restart runspecd`"
    )


def writable_check(spec: Spec, paths: RunPaths) -> CheckResult:
    ours, pid1 = _read(OURS), _read(PID1)
    for what, folder in write_targets(spec, paths):
        if _private_tmp(folder, ours):
            return failed(
                "writable",
                f"{what} {folder} is in runspecd's private /tmp, which nothing else sees "
                "and which goes when the daemon stops",
                f"put it outside /tmp and /var/tmp (a volume named in writable: in "
                f"{DEFAULT_CONFIG}), or run `runspec run` outside the daemon",
            )
        exc = _probe(folder)
        if exc is None:
            continue
        why = exc.strerror or str(exc)
        if exc.errno == errno.EROFS and _sandboxed(folder, ours, pid1):
            return failed(
                "writable",
                f"runspecd's sandbox cannot write {what} {folder}: only its state folder "
                "and the folders its config names under writable: are writable",
                _fix_writable(folder),
            )
        if exc.errno == errno.EROFS:
            return failed(
                "writable",
                f"cannot write {what} {folder}: the file system is read-only",
                "mount it read-write, or point the spec at a folder on a writable volume",
            )
        if exc.errno in (errno.EACCES, errno.EPERM):
            return failed(
                "writable",
                f"cannot write {what} {folder}: {why}",
                "make the folder writable by root: runspecd runs as root without any "
                "capability, so root writes only where the folder's owner and mode let it",
            )
        return failed("writable", f"cannot write {what} {folder}: {why}", "fix the folder")
    folders = ", ".join(str(folder) for _, folder in write_targets(spec, paths))
    return passed("writable", f"the run can write its folders: {folders}")
