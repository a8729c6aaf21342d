"""The processes that hold the keys (the daemon, `runspec run`) are not dumpable.

Under runspecd.service every process runs as root without a capability, so a child of the
daemon (the preflight's, a trainer outside systemd) would pass the kernel's ptrace check on the
daemon and read its /proc/PID/environ: every provider key from the EnvironmentFile. A process
that is not dumpable lets only CAP_SYS_PTRACE read its /proc files, ptrace it or dump its core,
and children get their own dumpable flag back at exec, so nothing of theirs changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("runspec")

PR_SET_DUMPABLE = 4


def make_undumpable() -> bool:
    """prctl(PR_SET_DUMPABLE, 0); False where the kernel or libc refused (logged)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0:
            return True
        log.warning("cannot make this process undumpable: errno %d", ctypes.get_errno())
    except OSError as exc:
        log.warning("cannot make this process undumpable: %s", exc)
    return False
