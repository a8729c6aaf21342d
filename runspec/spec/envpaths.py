"""Path-valued names in a spec's `env`: they obey the rule of run, push and data folders.

`env.HF_HOME` (and the other caches) land in the trainer unit's writable folders and are where
the trainer writes: `/`, `/etc` or the state folder's own parts there would let it write over
the system or runspec's records. A name that reads as a folder or a file (a known one, or one
ending like `_HOME`, `_DIR`, `_PATH`, `_CACHE`) takes an absolute path (`~` allowed) that
runspec.spec.safepaths allows for a run's folders; anything else is refused.
"""

from __future__ import annotations

import re
from pathlib import Path

from runspec.spec.safepaths import forbidden_folder

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


def forbidden_env_path(name: str, value: object, state: Path | None) -> str | None:
    """Why `value` may not be the folder `name` names; None when it may (or `name` is not a
    path-valued name)."""
    if not is_path_valued(name):
        return None
    text = str(value)
    if not text.startswith(("/", "~")):
        return (
            f"{name} names a folder the trainer writes: it takes an absolute path "
            f"(e.g. /root/cache), not {text!r}"
        )
    why = forbidden_folder(text, state)
    if why is None:
        return None
    return f"{name} {text!r} {why}: the trainer may not write there; use a folder of its own"
