"""Path-valued names in a spec's `env`: an allow list, as for the run's own folders.

`env.HF_HOME` (and the other caches) land in the trainer unit's writable folders
(`ReadWritePaths=`) and are where the trainer writes. A deny list of system folders let a spec
give the trainer root's `~/.ssh`, a shell's startup files or `~/bin` on root's PATH. A name that
reads as a folder or a file (a known one, or one ending like `_HOME`, `_DIR`, `_PATH`,
`_CACHE`) takes an absolute path (`~` allowed) inside a place caches and data belong (a volume,
a cache home, `/tmp`: ALLOWED) or the state folder (never its own parts: runspec.spec.safepaths);
anything else is refused. Not "inside the spec's output.project": `output.project: /root` would
then open `/root/.ssh` again.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path

from runspec.spec.safepaths import DEFAULT_STATE, forbidden_folder

# Volumes (RunPod's and vast.ai's /workspace, mounted disks, the instance-store NVMe an AWS
# Deep Learning AMI mounts at /opt/dlami/nvme, Lambda's persistent file systems under
# /lambda/nfs), scratch space and temporary folders: where a cache may go on any machine.
ALLOWED = (
    "/workspace",
    "/mnt",
    "/media",
    "/data",
    "/scratch",
    "/opt/dlami/nvme",
    "/lambda/nfs",
    "/tmp",
    "/var/tmp",
)
# A home's cache folder (XDG's default, huggingface_hub's and torch's default parent), and no
# other part of a home.
_CACHE_HOME = re.compile(r"^/(root|home/[^/]+)/\.cache(/|$)")
_FIX = (
    "use a folder under /workspace, /mnt, /data, /scratch or /tmp, a home's ~/.cache, "
    "or the state folder's"
)

# Folders the trainer's libraries (huggingface_hub, torch, triton, matplotlib, XDG) write to,
# whose names the pattern below would not catch.
KNOWN = frozenset(
    {
        "HF_HOME",
        "HF_HUB_CACHE",
        "HF_ASSETS_CACHE",
        "HF_XET_CACHE",
        "HF_DATASETS_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "HUGGINGFACE_ASSETS_CACHE",
        "TRANSFORMERS_CACHE",
        "TORCH_HOME",
        "TORCH_EXTENSIONS_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
        "PYTORCH_KERNEL_CACHE_PATH",
        "TRITON_CACHE_DIR",
        "TRITON_HOME",
        "CUDA_CACHE_PATH",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
        "MPLCONFIGDIR",
        "TMPDIR",
        "TMP",
        "TEMP",
    }
)
_PATHLIKE = re.compile(r"(_HOME|_DIR|_DIRS|_PATH|_PATHS|_CACHE|_ROOT|_FILE|_FOLDER)$")


def is_path_valued(name: str) -> bool:
    upper = name.upper()
    return upper in KNOWN or bool(_PATHLIKE.search(upper))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _normal(path: str) -> str:
    return "/" + posixpath.normpath(os.path.expanduser(path)).lstrip("/")


def forbidden_env_path(name: str, value: object, state: Path | None) -> str | None:
    """Why `value` may not be the folder `name` names; None when it may (or `name` is not a
    path-valued name)."""
    if not is_path_valued(name):
        return None
    text = str(value)
    if not text.startswith(("/", "~")):
        return (
            f"{name} names a folder the trainer writes: it takes an absolute path "
            f"(e.g. /workspace/hf), not {text!r}"
        )
    why = forbidden_folder(text, state)
    if why is not None:
        return f"{name} {text!r} {why}: the trainer may not write there; {_FIX}"
    full = _normal(text)
    base = _normal(str(state)) if state is not None else DEFAULT_STATE
    roots = (*ALLOWED, base)
    if _CACHE_HOME.match(full) or any(_inside(full, root) for root in roots):
        return None
    return (
        f"{name} {text!r} is not a folder for caches or data: the trainer may not write "
        f"there; {_FIX}"
    )
