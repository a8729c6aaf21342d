"""Disk checks: enough free space for the data and the checkpoints, and HF_HOME on a volume.

The LibreYOLO guide's rule: prepared data + checkpoints + about 30 % headroom. A checkpoint's
size is estimated from the model's parameter count; yolo9-t (2.04 M parameters) writes a 35 MB
last.pt (model, EMA, raw weights and optimizer state: about 17 bytes a parameter).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from runspec.checkresult import CheckResult, failed, passed, warned
from runspec.spec.model import Spec
from runspec.units import format_bytes

HEADROOM = 1.3
BYTES_PER_PARAM = 35e6 / 2.04e6
# Millions of parameters, from the LibreYOLO model zoo and the families' papers.
PARAMS_M: dict[str, dict[str, float]] = {
    "yolo9": {"t": 2.04, "s": 7.2, "m": 20.1, "c": 25.5, "e": 58.1},
    "yolox": {"n": 0.91, "t": 5.06, "s": 9.0, "m": 25.3, "l": 54.2, "x": 99.1},
    "rtmdet": {"t": 4.9, "s": 8.89, "m": 24.71, "l": 52.3, "x": 94.86},
    "yolo7": {"b": 36.9},
    "picodet": {"s": 0.99, "m": 2.15, "l": 3.3},
    "rtdetr": {"s": 20.0, "m": 31.0, "l": 42.0, "x": 76.0},
    "dfine": {"n": 4.0, "s": 10.0, "m": 19.0, "l": 31.0, "x": 62.0},
    "deim": {"n": 4.0, "s": 10.0, "m": 19.0, "l": 31.0, "x": 62.0},
}
UNKNOWN_MODEL_PARAMS_M = 60.0  # errs on the large side: a run that stops for disk costs more


def model_params_m(model: str) -> tuple[float, bool]:
    """(millions of parameters, known?) for names like yolo9-t, LibreYOLO9s.pt, LibreYOLOXn.pt."""
    stem = Path(model).name.lower().removesuffix(".pt")
    if stem.startswith("libreyolo"):
        stem = "yolo" + stem.removeprefix("libreyolo")
    parts = re.split(r"[-_]", stem)
    # "yolo9-t", "yolo9-t-seg"; or "yolo9t" from LibreYOLO9t.pt, the size its last letter.
    family, size = (parts[0], parts[1]) if len(parts) > 1 else (stem[:-1], stem[-1:])
    known = PARAMS_M.get(family, {}).get(size)
    if known is not None:
        return known, True
    return UNKNOWN_MODEL_PARAMS_M, False


def checkpoint_bytes(model: str) -> tuple[int, bool]:
    params, known = model_params_m(model)
    return int(params * 1e6 * BYTES_PER_PARAM), known


def checkpoint_count(epochs: int, save_period: int) -> int:
    """last.pt, best.pt, and one epoch_N.pt every save_period epochs."""
    return 2 + (epochs // save_period if save_period > 0 else 0)


def free_bytes(path: Path) -> tuple[int, Path]:
    probe = path
    while not probe.exists():
        probe = probe.parent
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize, probe


@dataclass(frozen=True)
class Need:
    where: Path
    nbytes: int
    what: str


def disk_check(
    spec: Spec, run_dir: Path, data_root: Path, data_bytes: int, staged_dir: Path | None = None
) -> CheckResult:
    """Free space on the run's, the data's and the staging folder's filesystems against what
    the run will write: checkpoints, the dataset, and the staged copy of every checkpoint a
    push sends (each is copied whole before it is hashed and uploaded; with the Hub down for
    the whole run, none is released)."""
    if spec.preflight.disk is not None:
        needs = [Need(run_dir, spec.preflight.disk, "preflight.disk")]
    else:
        one, known = checkpoint_bytes(spec.train.model)
        count = checkpoint_count(spec.train.epochs, spec.train.save_period)
        guess = "" if known else " (model not in runspec's table: assumed 60 M parameters)"
        ckpt = int(one * count * HEADROOM)
        needs = [
            Need(run_dir, ckpt, f"{count} checkpoints x {format_bytes(one)}{guess} + 30%"),
        ]
        if spec.push is not None and staged_dir is not None:
            needs.append(Need(staged_dir, ckpt, f"their {count} staged copies for the push"))
        if data_bytes:
            needs.append(
                Need(
                    data_root,
                    int(data_bytes * HEADROOM),
                    f"dataset {format_bytes(data_bytes)} + 30%",
                )
            )
    by_fs: dict[int, tuple[Path, int, list[str], int]] = {}
    for need in needs:
        free, probe = free_bytes(need.where)
        dev = os.stat(probe).st_dev
        where, total, parts, _ = by_fs.get(dev, (probe, 0, [], free))
        by_fs[dev] = (where, total + need.nbytes, [*parts, need.what], free)
    short = [(w, t, p, f) for w, t, p, f in by_fs.values() if t > f]
    if short:
        where, total, parts, free = short[0]
        return failed(
            "disk",
            f"the run needs {format_bytes(total)} ({'; '.join(parts)}) on {where}, "
            f"which has {format_bytes(free)} free",
            _disk_fix(spec),
        )
    summary = "; ".join(
        f"{format_bytes(t)} needed ({', '.join(p)}) of {format_bytes(f)} free on {w}"
        for w, t, p, f in by_fs.values()
    )
    return passed("disk", summary)


def _disk_fix(spec: Spec) -> str:
    where = "point output.project / dataset.extract_to at a volume with room"
    if spec.preflight.disk is not None:
        return f"free space, attach a larger disk, {where}, or lower preflight.disk"
    epoch_files = checkpoint_count(spec.train.epochs, spec.train.save_period) - 2
    fewer = (
        f"raise train.save_period (it keeps {epoch_files} epoch_N.pt files), "
        if epoch_files > 10
        else ""
    )
    return (
        f"free space, attach a larger disk, {fewer}{where}, or set preflight.disk to "
        "what the run will really write (a budget that ends it early writes less)"
    )


@dataclass(frozen=True)
class Mount:
    point: Path
    fstype: str
    source: str


def parse_mountinfo(text: str) -> list[Mount]:
    """Mounts from /proc/self/mountinfo (the mount point is field 5, the type after ' - ')."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        tail = right.split()
        if not sep or len(fields) < 5 or len(tail) < 2:
            continue
        point = fields[4].replace("\\040", " ")
        mounts.append(Mount(Path(point), tail[0], tail[1]))
    return mounts


def mount_of(path: Path, mounts: list[Mount]) -> Mount | None:
    best: Mount | None = None
    for mount in mounts:
        inside = path == mount.point or mount.point in path.parents
        if inside and (best is None or len(mount.point.parts) > len(best.point.parts)):
            best = mount
    return best


THROWAWAY = {"overlay", "aufs", "tmpfs"}
_SYSTEM_MOUNTS = ("/proc", "/sys", "/dev", "/run", "/etc", "/usr", "/boot", "/var/lib/docker")


def persistent_volumes(mounts: list[Mount]) -> list[Path]:
    """Mounted filesystems a user would keep data on (a provider's volume, not the image)."""
    skip = {
        "proc",
        "sysfs",
        "cgroup",
        "cgroup2",
        "devpts",
        "mqueue",
        "tmpfs",
        "overlay",
        "aufs",
        "devtmpfs",
        "securityfs",
        "debugfs",
        "tracefs",
        "pstore",
        "bpf",
        "autofs",
        "hugetlbfs",
        "fusectl",
        "configfs",
        "binfmt_misc",
        "nsfs",
        "squashfs",
    }
    return [
        m.point
        for m in mounts
        if m.fstype not in skip
        and m.point != Path("/")
        and not str(m.point).startswith(_SYSTEM_MOUNTS)
    ]


def hf_home_check(hf_home: Path, mountinfo: str) -> CheckResult:
    mounts = parse_mountinfo(mountinfo)
    mount = mount_of(hf_home.absolute(), mounts)
    if mount is None or mount.fstype not in THROWAWAY:
        kind = f"{mount.fstype} at {mount.point}" if mount else "unknown filesystem"
        return passed("hf_home", f"HF_HOME {hf_home} is on {kind}")
    volumes = persistent_volumes(mounts)
    fix = (
        f"set env.HF_HOME to a folder on {volumes[0]} in the spec"
        if volumes
        else "mount a persistent volume and set env.HF_HOME to a folder on it"
    )
    return warned(
        "hf_home",
        f"HF_HOME {hf_home} is on the container's {mount.fstype} layer at {mount.point}: "
        "downloads there are lost with the container",
        fix,
    )
