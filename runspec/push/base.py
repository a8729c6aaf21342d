"""The one small interface every push target implements, and the secret scrubber.

A target takes staged files (whole, hashed copies; never the trainer's live files), makes
them one unit on the remote side (a Hub commit, a folder's manifest written last) and then
checks, on the remote side, that what arrived is what was sent.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runspec.errors import RunspecError
from runspec.push.manifest import ManifestEntry

_TOKEN_SHAPE = re.compile(r"hf_[A-Za-z0-9]{6,}")


class PushFailed(RunspecError):
    """A push that did not reach the target or could not be verified there (one line)."""


@dataclass(frozen=True)
class StagedFile:
    entry: ManifestEntry
    local: Path  # the staged copy the entry's hash was computed on


class PushTarget(ABC):
    description: str  # for people: "hub my-org/run1", "dir /mnt/vol/runs/run1"

    @abstractmethod
    def push(self, uploads: Sequence[StagedFile], message: str) -> str | None:
        """Upload `uploads` as one unit; return its commit id (None where there is none)."""

    @abstractmethod
    def verify(
        self, commit: str | None, expected: Sequence[ManifestEntry], uploaded: Sequence[StagedFile]
    ) -> list[str]:
        """What differs at the target from `expected` (empty: verified). `uploaded` are the
        files this push sent, with their local copies."""


def scrub(text: str) -> str:
    """`text` with any Hub token blanked out: error messages end up in logs and records."""
    secrets = {os.environ.get("HF_TOKEN"), os.environ.get("HUGGING_FACE_HUB_TOKEN")}
    hub = sys.modules.get("huggingface_hub")  # only where it was used could it know a token
    if hub is not None:
        # Scrubbing must never raise; the token-shaped regex below still applies.
        with contextlib.suppress(Exception):
            secrets.add(hub.get_token())
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _TOKEN_SHAPE.sub("hf_***", text)


def one_line(exc: BaseException) -> str:
    """An exception as one scrubbed line, for records and progress lines."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if len(text) > 300:
        text = text[:297] + "..."
    return scrub(f"{type(exc).__name__}: {text}")
