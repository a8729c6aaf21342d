"""A GCP stop and the VM's Local SSDs: GCE stops a VM that has them only when told to discard
their data (`discardLocalSsd=true`, which runspec sends: without it the stop is refused and the
GPU bills on), so a run whose own folders are on one would lose its state and checkpoints at
the very stop meant to keep them.

Local SSDs are named by GCE's guest environment udev rules (GoogleCloudPlatform/guest-configs):
/dev/disk/by-id/google-local-ssd-N (SCSI) and google-local-nvme-ssd-N (NVMe); an A3's sixteen
are often joined in one md RAID0 and mounted as scratch.
Read from the machine only, nothing over the network.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from runspec.checkresult import CheckResult, failed, warned
from runspec.preflight.disk import mount_of, parse_mountinfo
from runspec.providers import detect
from runspec.spec.model import FinishAction, FinishSpec, Unverified

NAME = "finish"
BY_ID = "dev/disk/by-id"
PREFIXES = ("google-local-ssd-", "google-local-nvme-ssd-")
_PARTITION = re.compile(r"^(nvme\d+n\d+)p\d+$|^(sd[a-z]+)\d+$")
FIX = (
    "keep runspec's state and runs folders on the boot disk or a persistent disk, or set "
    "finish.action: destroy with push.hub (a stop discards every Local SSD)"
)


def local_ssds(root: Path) -> set[str]:
    """The kernel names (nvme0n2, sdb) of the machine's Local SSDs."""
    try:
        links = list((root / BY_ID).iterdir())
    except OSError:
        return set()
    found = set()
    for link in links:
        if link.name.startswith(PREFIXES) and "-part" not in link.name:
            try:
                found.add(link.resolve(strict=True).name)
            except OSError:
                continue
    return found


def _whole(name: str) -> str:
    """The disk a partition is on (nvme0n2p1 -> nvme0n2, sdb1 -> sdb); a disk itself."""
    m = _PARTITION.match(name)
    return (m.group(1) or m.group(2)) if m else name


def _devices(source: str, root: Path) -> set[str]:
    """The disks under a mount's source: its own, or an md array's members'."""
    name = Path(source).name
    try:
        members = [p.name for p in (root / "sys/block" / name / "slaves").iterdir()]
    except OSError:
        members = []
    return {_whole(n) for n in [name, *members]}


def _on_gcp(finish: FinishSpec, env: Mapping[str, str] | None) -> bool:
    if finish.provider == "gcp":
        return True
    found = detect(env) if finish.provider == "auto" else None
    return found is not None and found[0] == "gcp"


def local_ssd_checks(
    finish: FinishSpec, folders: Sequence[Path], root: Path, env: Mapping[str, str] | None
) -> list[CheckResult]:
    """A failure when `finish.action: stop` on GCP would discard the run's own folders (a
    warning when only finish.unverified's stop would); nothing when no folder is on one."""
    stops = finish.action in (FinishAction.STOP, FinishAction.AUTO)
    unverified = finish.unverified is Unverified.STOP
    if not (stops or unverified) or not folders or not _on_gcp(finish, env):
        return []
    ssds = local_ssds(root)
    if not ssds:
        return []
    try:
        mounts = parse_mountinfo((root / "proc/self/mountinfo").read_text(errors="replace"))
    except OSError:
        return []
    on = []
    for folder in folders:
        mount = mount_of(folder.absolute(), mounts)
        if mount is not None and _devices(mount.source, root) & ssds:
            on.append(f"{folder} ({mount.source})")
    if not on:
        return []
    said = f"{', '.join(on)} on a Local SSD, which a GCP stop discards"
    if finish.action is FinishAction.STOP:
        return [failed(NAME, f"finish.action stop would lose this run's folders: {said}", FIX)]
    what = "finish.action auto" if stops else "finish.unverified stop"
    return [warned(NAME, f"{what} would lose this run's folders if it stops: {said}", FIX)]
