"""The one small interface every push target implements, and the secret scrubber.

A target takes staged files (whole, hashed copies; never the trainer's live files), makes
them one unit on the remote side (a Hub commit, a folder's manifest written last) and then
checks, on the remote side, that what arrived is what was sent; before a machine ends, it
reads the final weights back and hashes what it got.

Each target class owns what only it knows: the `push:` key it answers to, how to describe
itself, its preflight check, and whether its copies would die with the machine. Which classes
there are is one explicit tuple (runspec.push.targets), not a side effect of importing them.
"""

from __future__ import annotations

import contextlib
import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from runspec.errors import RunspecError
from runspec.push.manifest import ManifestEntry
from runspec.secrets import redact

if TYPE_CHECKING:
    from runspec.checkresult import CheckResult
    from runspec.spec.model import Spec
    from runspec.store.paths import RunPaths


class PushFailed(RunspecError):
    """A push that did not reach the target or could not be verified there (one line).

    `permanent`: the target refused it in a way that trying again does not change (an HTTP
    403 or 404: a token that may not write, a repo that is not there), not an outage.
    `retry_after`: seconds the target said to wait before trying again (the Hub's commit
    quota), else None."""

    def __init__(
        self, message: str, permanent: bool = False, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.retry_after = retry_after


@dataclass(frozen=True)
class StagedFile:
    entry: ManifestEntry
    local: Path  # the staged copy the entry's hash was computed on


class PushTarget(ABC):
    description: str  # for people: "hub my-org/run1", "dir /mnt/vol/runs/run1"
    key: ClassVar[str]  # the push section's key it answers to: "hub", "dir"

    @classmethod
    @abstractmethod
    def from_spec(cls, spec: Spec, paths: RunPaths) -> PushTarget: ...

    @classmethod
    @abstractmethod
    def where(cls, spec: Spec, paths: RunPaths) -> str:
        """For people, without building the target: "hub me/run1", "dir /mnt/vol/run1"."""

    @classmethod
    @abstractmethod
    def preflight(cls, spec: Spec, paths: RunPaths) -> CheckResult:
        """Whether pushes there can work, changing nothing there."""

    @classmethod
    def dies_with_machine(cls, spec: Spec, paths: RunPaths) -> str | None:
        """Why copies pushed here would be lost with the machine, or None."""
        return None

    @abstractmethod
    def push(self, uploads: Sequence[StagedFile], message: str) -> str | None:
        """Upload `uploads` as one unit; return its commit id (None where there is none)."""

    @abstractmethod
    def verify(
        self, commit: str | None, expected: Sequence[ManifestEntry], uploaded: Sequence[StagedFile]
    ) -> list[str]:
        """What differs at the target from `expected` (empty: verified). `uploaded` are the
        files this push sent, with their local copies."""

    @abstractmethod
    def read_back(self, commit: str | None, entries: Sequence[ManifestEntry]) -> list[str]:
        """Read `entries` back from the target at `commit` (never through a local cache),
        hash the bytes that come, and say what differs from the entries (empty: all match)."""


def scrub(text: str) -> str:
    """`text` with every secret blanked out (error messages end up in logs and records), by the
    one scrubber (runspec.secrets.redact): the Hub's stored login, the one secret a push may hold
    that no environment variable does, is added to its registry where the Hub client was used."""
    hub = sys.modules.get("huggingface_hub")
    if hub is not None:  # only where it was used could it know a token
        with contextlib.suppress(Exception):  # scrubbing never fails for want of a token store
            redact.register(hub.get_token() or "")
    return redact.scrub(text)


def http_status(exc: BaseException) -> int | None:
    """The HTTP status of the answer a client's error carries (None without one): the Hub's
    412 to an optimistic lock is how a writer learns the branch moved."""
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def one_line(exc: BaseException) -> str:
    """An exception as one scrubbed line, for records and progress lines."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if len(text) > 300:
        text = text[:297] + "..."
    return scrub(f"{type(exc).__name__}: {text}")
