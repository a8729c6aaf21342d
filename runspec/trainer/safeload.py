"""A checkpoint a resume starts from is data, never code.

LibreYOLO loads a checkpoint with `torch.load(weights_only=False)`: plain pickle, so an object
with a `__reduce__` in it runs whatever it names as the trainer's root. The checkpoint a resume
starts from may come from outside the box (downloaded from the run's Hub repo on a fresh
machine, which anyone with write access to that repo, or to a repo whose name was typed wrong,
can fill). So before LibreYOLO ever sees it, the trainer loads it with `weights_only=True`:
torch's restricted unpickler, which builds tensors, containers and numbers, and any other global
only from the allow list below. Anything else is refused with one line naming it.

The allow list is what LibreYOLO's own checkpoints need, found by saving real ones (yolo9-t on
the CPU, tests/test_safeload.py checks it again on every run): nothing. LibreYOLO 1.6.0 stores
its config, its RNG states (numpy's as plain lists) and its optimizer as dicts, lists, numbers
and tensors, all of which torch's restricted unpickler builds without an allow list.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from runspec.trainer.heavyimports import heavy_imports

# Globals beyond torch's own weights-only set that LibreYOLO's checkpoints hold: none (above).
ALLOWED: tuple[Callable[..., Any] | type, ...] = ()


class UnsafeCheckpoint(Exception):
    """The checkpoint cannot be loaded as data alone."""


def load_as_data(checkpoint: Path) -> Any:
    """The checkpoint's contents, built by torch's weights-only unpickler (no code of the
    file's runs); UnsafeCheckpoint with one line when it holds anything else or is unreadable."""
    with heavy_imports():
        import torch

    try:
        with torch.serialization.safe_globals(list(ALLOWED)):
            return torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # torch's UnpicklingError, a damaged archive, an unreadable file
        raise UnsafeCheckpoint(_why(checkpoint, exc)) from None


def _why(checkpoint: Path, exc: Exception) -> str:
    text = " ".join(str(exc).split())
    named = _named_global(text)
    if named is not None:
        return (
            f"the checkpoint {checkpoint} holds {named}, which is not data a LibreYOLO "
            "checkpoint holds (tensors, numbers, strings, lists and dicts): refused, nothing "
            "in it was run. Resume from a checkpoint this run wrote, or train from the start"
        )
    return (
        f"the checkpoint {checkpoint} cannot be read as data alone ({text[:200]}): refused, "
        "nothing in it was run. Resume from a checkpoint this run wrote, or train from the start"
    )


def _named_global(text: str) -> str | None:
    """The global torch's weights-only unpickler refused, from its message
    ("Unsupported global: GLOBAL builtins.exec was not an allowed global ...")."""
    marker = "GLOBAL "
    at = text.find(marker)
    if at < 0:
        return None
    name = text[at + len(marker) :].split(" ", 1)[0]
    clean = "".join(c for c in name if c.isascii() and (c.isalnum() or c in "._"))
    return f"a reference to {clean[:120]!r}" if clean else None


def trained_epochs(checkpoint: Path) -> int | None:
    """How many epochs the checkpoint's run had trained, as LibreYOLO counts them when it
    resumes (its `epoch` + 1); None when the file says nothing readable (UnsafeCheckpoint
    when it holds more than data)."""
    state = load_as_data(checkpoint)
    epoch = state.get("epoch") if isinstance(state, dict) else None
    return int(epoch) + 1 if isinstance(epoch, int) and not isinstance(epoch, bool) else None
