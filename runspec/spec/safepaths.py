"""Folders a spec may not send run folders, pushes or datasets to: the system's and runspec's own.

runspec creates and writes the folders a spec names (the run folder under `output.project`, a
push volume, a dataset's extraction, the label caches beside a `dataset.path`). A slip there
(`/`, `/etc`, `/usr`, or the state folder's `jobs`) would scatter files over the system or over
runspec's own records. Paths are judged as written, after `~` and `..`, a relative one under
the state folder, without touching the disk: `validate` runs on a laptop as well as on the
machine, and a path that does not exist yet is as wrong as one that does.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path

# The folder and everything under it.
SYSTEM_TREES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var/lock",
    "/var/run",
)
# Only the folder itself: its subfolders are where people keep things.
SYSTEM_FOLDERS = ("/", "/var", "/var/lib")
# The state folder's own parts (and the state folder itself): records, claims, the inbox and
# the trainer's working folder. `runs`, `data` and `pushed` are for runs.
# They are named here, the lowest stage, so that this rule and the layout (runspec.store.paths)
# read the same names.
JOBS = "jobs"
CLAIMED = "claimed"  # specs the daemon took from the inbox, until accepted
INBOX = "inbox"
CACHE = "cache"
STATE_INTERNALS = (JOBS, CLAIMED, INBOX, CACHE)
DEFAULT_STATE = "/var/lib/runspec"


@dataclass(frozen=True)
class FolderField:
    path: tuple[str, str]
    what: str  # what would be written there
    fix: str
    is_file: bool = False  # the field names a file; its folder is what gets written


FOLDER_FIELDS = (
    FolderField(
        ("output", "project"), "run folders", "use a folder of their own, e.g. /root/runs or runs"
    ),
    FolderField(("push", "dir"), "pushes", "use a folder of their own, e.g. /mnt/volume/runs"),
    FolderField(
        ("dataset", "extract_to"), "datasets", "use a folder of their own, e.g. /root/data or data"
    ),
    FolderField(
        ("dataset", "path"),
        "a dataset (its label caches are written beside it)",
        "keep the dataset in a folder of its own, e.g. /root/data/my-dataset/data.yaml",
        is_file=True,
    ),
)


def _normal(path: str) -> str:
    # POSIX lets a path start with exactly two slashes; the kernel treats //etc as /etc.
    return "/" + posixpath.normpath(path).lstrip("/")


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _system(folder: str) -> str | None:
    """The system folder `folder` is or lies inside, if any."""
    if folder in SYSTEM_FOLDERS:
        return folder
    return next((tree for tree in SYSTEM_TREES if _under(folder, tree)), None)


def _internal(folder: str, state: str) -> str | None:
    """The part of the state folder `folder` is or lies inside, if any."""
    if folder == state:
        return state
    parts = (f"{state}/{part}" for part in STATE_INTERNALS)
    return next((part for part in parts if _under(folder, part)), None)


def forbidden_folder(
    written: str, state: Path | None = None, *, is_file: bool = False
) -> str | None:
    """Why the folder `written` names (for a file: the folder it is in) may not be written,
    as a phrase after the path ("is inside /etc, a system folder"); None when it may.
    `state` is the daemon's state folder where known: relative paths are under it."""
    base = _normal(str(state)) if state is not None else DEFAULT_STATE
    expanded = os.path.expanduser(written)
    full = _normal(expanded if expanded.startswith("/") else f"{base}/{expanded}")
    folder = posixpath.dirname(full) if is_file else full
    inside = "is in" if is_file else "is inside"
    shown = "" if full == expanded.rstrip("/") or written == "/" else f" ({full})"
    system = _system(folder)
    if system is not None:
        if folder == system and not is_file:
            return f"{shown} is a system folder".lstrip()
        return f"{shown} {inside} {system}, a system folder".lstrip()
    for state_dir in dict.fromkeys((base, DEFAULT_STATE)):
        part = _internal(folder, state_dir)
        if part == state_dir:
            return f"{inside} the state folder itself" if is_file else "is the state folder itself"
        if part is not None:
            name = part.rsplit("/", 1)[1]
            if folder == part and not is_file:
                return f"is runspec's own {name}/ in the state folder"
            return f"{inside} runspec's own {name}/ in the state folder"
    return None
