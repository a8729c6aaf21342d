"""A process that holds the provider keys, out of a trainer's reach by uid.

Outside systemd the trainer runs as root (uid 0) without any capability. The kernel lets a
process signal another when the sender's real or effective uid is the target's real or saved
uid, and read its /proc files or ptrace it when every uid matches; capabilities aside, uid 0
meets uid 0. So a process that must outlive everything else on the box (the failsafe watcher,
which ends the machine when runspec is gone) keeps uid 0 only as its effective uid, and
so all of root's reach and capabilities, while its real and saved uids are APART_UID: a trainer
without CAP_KILL can neither signal it nor read its environment. Before it acts it takes uid 0
back whole, so what it runs (a finish command, a shell script, which drops an effective uid
that is not its real one) runs as root as ever.

`runspec run` and the daemon keep apart the same way where their trainers are not systemd units
(runspec.trainer.launcher): a trainer takes uid 0 back whole as it walls itself in
(runspec.secrets.childwalls), so it shares no uid with its driver; what the driver runs as
root on purpose (a finish command, a poweroff) runs with uid 0 whole (`as_root`).

Where the kernel refuses (no CAP_SETUID: a launcher that is not root, a daemon's unit without
capabilities), nothing changes, and the caller says so.
"""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path
from typing import Any

# No account of its own needed: only an id no process of the trainer has. Below 65536, so a
# container's user namespace (65536 ids, most often) maps it.
APART_UID = 61_034
SYSTEMD_RUNNING = Path("/run/systemd/system")


def trainers_are_units() -> bool:
    """Whether a trainer started here is a systemd unit (runspec.trainer.launcher), else a
    session of its own, of the launcher's uid."""
    return SYSTEMD_RUNNING.is_dir() and shutil.which("systemd-run") is not None


def set_apart() -> str | None:
    """Real and saved uid APART_UID, effective uid 0 kept; None when done, else why not."""
    if os.geteuid() != 0:
        return "not root: nothing to keep apart"
    if "HOME" not in os.environ:  # found by the real uid otherwise, which has no account
        os.environ["HOME"] = pwd.getpwuid(0).pw_dir
    try:
        os.setresuid(APART_UID, 0, APART_UID)
    except OSError as exc:
        return f"cannot keep its uid apart from the trainer's ({exc.strerror or exc})"
    return None


def rejoin() -> None:
    """uid 0 whole again (real, effective, saved), before running anything; a no-op unless
    set_apart() held."""
    if os.geteuid() == 0 and os.getresuid() != (0, 0, 0):
        os.setresuid(0, 0, 0)


def is_apart() -> bool:
    return os.geteuid() == 0 and os.getuid() != 0


def as_root() -> dict[str, Any]:
    """subprocess's arguments that run a child with uid 0 whole from a process kept apart (a
    shell drops an effective uid that is not its real one); none elsewhere."""
    return {"user": 0} if is_apart() else {}
