"""A child that runs third-party code walls itself in before it loads any (the preflight's
child, outside systemd; under systemd its unit does this and more).

Root outside systemd (`runspec run` in a container, `runspec preflight`) hands its children
every capability: one could remount, ptrace the launcher or read anything. So, first thing:

- with CAP_SYS_ADMIN, a mount namespace of its own in which the folders it must never see
  (runspec.store.offlimits: /etc/runspec, the inbox, the claimed specs) are covered by an
  empty read-only tmpfs: uid 0 reads root's 0600 env file without any capability, so only
  not seeing it keeps the keys out of reach;
- uid 0 whole (real, effective, saved) when its launcher kept its own real uid apart
  (runspec.secrets.apartuid): a child shares no uid with the process that holds the keys;
- no capability left: an empty bounding set, no ambient ones, empty effective, permitted and
  inheritable sets (what it execs gets none back either);
- no new privileges (no setuid program gives any), and not dumpable (no capability-less
  process of the same uid reads its environment, which may hold the Hub token).

Each step is tried on its own; what the kernel refused is returned, to be said, never fatal:
a child with fewer walls still runs its checks.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from collections.abc import Sequence
from pathlib import Path

from runspec.secrets.apartuid import rejoin
from runspec.secrets.undumpable import make_undumpable

PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAP_SYS_ADMIN = 21
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 1 << 18
_CAP_VERSION_3 = 0x20080522
LAST_CAP = 63


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def has_capability(cap: int) -> bool:
    """Whether `cap` is in this process's effective set (/proc/self/status, CapEff)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> cap & 1)
    return False


def _own_namespace(libc: ctypes.CDLL) -> str | None:
    """A mount namespace of its own, whose mounts stay its own; None when done, else why not."""
    if libc.unshare(CLONE_NEWNS) != 0:
        return f"no mount namespace of its own (errno {ctypes.get_errno()})"
    # Our mounts stay ours: nothing made here reaches the launcher's namespace.
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return f"cannot make its mounts private (errno {ctypes.get_errno()})"
    return None


def _hide(libc: ctypes.CDLL, hidden: Sequence[Path]) -> list[str]:
    refused = []
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    for folder in hidden:
        if not folder.is_dir():
            continue  # a file (the machine's end) is no key; the folders hold them
        where = os.fsencode(folder)
        if libc.mount(b"tmpfs", where, b"tmpfs", flags, b"size=4k,mode=000") != 0:
            refused.append(f"cannot hide {folder} (errno {ctypes.get_errno()})")
    return refused


def _drop_capabilities(libc: ctypes.CDLL) -> list[str]:
    refused = []
    for cap in range(LAST_CAP + 1):
        # EINVAL past the kernel's last capability; EPERM without CAP_SETPCAP, which a launcher
        # without capabilities (the daemon's unit) already runs with an empty bounding set.
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_CAP_VERSION_3, 0)
    empty = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), empty) != 0:
        refused.append(f"cannot drop its capabilities (errno {ctypes.get_errno()})")
    return refused


def _blank(libc: ctypes.CDLL, files: Sequence[Path]) -> list[str]:
    """/dev/null bound over each file (in the mount namespace _hide made): it reads empty."""
    refused = []
    for path in files:
        if not path.is_file():
            continue
        if libc.mount(b"/dev/null", os.fsencode(path), None, MS_BIND, None) != 0:
            refused.append(f"cannot hide {path} (errno {ctypes.get_errno()})")
    return refused


def _read_only(libc: ctypes.CDLL, folder: Path, writable: Sequence[Path]) -> list[str]:
    """`folder` read-only in this mount namespace, but for the `writable` folders inside it
    (each bound onto itself first: the read-only remount is of the top mount only)."""
    top = Path(os.path.realpath(folder))
    if not top.is_dir():
        return []
    refused = []
    inside = dict.fromkeys(Path(os.path.realpath(w)) for w in writable)
    for path in [w for w in inside if w != top and w.is_relative_to(top)]:
        with contextlib.suppress(OSError):  # then the bind below says so
            path.mkdir(parents=True, exist_ok=True)
        where = os.fsencode(path)
        if libc.mount(where, where, None, MS_BIND | MS_REC, None) != 0:
            refused.append(f"cannot keep {path} writable (errno {ctypes.get_errno()})")
    where = os.fsencode(top)
    if (
        libc.mount(where, where, None, MS_BIND | MS_REC, None) != 0
        or libc.mount(None, where, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None) != 0
    ):
        refused.append(f"cannot make {top} read-only (errno {ctypes.get_errno()})")
    return refused


def wall_in(
    hidden: Sequence[Path],
    hidden_files: Sequence[Path] = (),
    read_only: Path | None = None,
    writable: Sequence[Path] = (),
) -> list[str]:
    """Hide the folders `hidden` and the files `hidden_files`, make `read_only` read-only but
    for the `writable` folders in it, drop every capability, no new privileges, not dumpable;
    returns what the kernel refused (empty when every wall stands)."""
    try:
        libc = _libc()
    except OSError as exc:
        return [f"no walls: {exc}"]
    refused: list[str] = []
    if has_capability(CAP_SYS_ADMIN):
        failed = _own_namespace(libc)
        if failed is not None:
            refused.append(failed)
        else:
            refused = _hide(libc, hidden) + _blank(libc, hidden_files)
            if read_only is not None:
                refused += _read_only(libc, read_only, writable)
    # Started by a driver kept apart (runspec.secrets.apartuid): uid 0 whole, or it would share
    # its real uid with the driver's, and could signal it.
    try:
        rejoin()
    except OSError as exc:
        refused.append(f"cannot take uid 0 back whole ({exc.strerror or exc})")
    refused += _drop_capabilities(libc)
    if not make_undumpable():
        refused.append("cannot make itself undumpable")
    # Last, so that NoNewPrivs in /proc/PID/status says every wall is up.
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        refused.append(f"cannot refuse new privileges (errno {ctypes.get_errno()})")
    return refused
