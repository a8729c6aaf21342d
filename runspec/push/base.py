"""The one small interface every push target implements, and the secret scrubber.

A target takes staged files (whole, hashed copies; never the trainer's live files), makes
them one unit on the remote side (a Hub commit, a folder's manifest written last) and then
checks, on the remote side, that what arrived is what was sent; before a machine ends, it
reads the final weights back and hashes what it got.

Each target class owns what only it knows: the `push:` key it answers to, how to describe
itself, its preflight check, the secrets it may hold (every subclass is registered as it is
defined, so `scrub()` knows them all: a new target cannot forget its secrets), and whether
its copies would die with the machine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from runspec import redact
from runspec.errors import RunspecError
from runspec.push.manifest import ManifestEntry

if TYPE_CHECKING:
    from runspec.model import PushSpec, Spec
    from runspec.paths import RunPaths
    from runspec.preflight.report import CheckResult


class PushFailed(RunspecError):
    """A push that did not reach the target or could not be verified there (one line)."""


@dataclass(frozen=True)
class StagedFile:
    entry: ManifestEntry
    local: Path  # the staged copy the entry's hash was computed on


class PushTarget(ABC):
    description: str  # for people: "hub my-org/run1", "dir /mnt/vol/runs/run1"
    key: ClassVar[str]  # the push section's key it answers to: "hub", "dir"
    _kinds: ClassVar[dict[str, type[PushTarget]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        # Only a class that names its own key is a kind: a subclass of one (a test's slow
        # volume, say) must not take over every spec's push.
        if "key" in cls.__dict__:
            PushTarget._kinds[cls.key] = cls

    @classmethod
    def kind_of(cls, push: PushSpec) -> type[PushTarget]:
        """The target class the push section names (its modules imported by runspec.push)."""
        for key, kind in cls._kinds.items():
            if getattr(push, key, None) is not None:
                return kind
        raise PushFailed(f"the push section names no target ({', '.join(cls._kinds)})")

    @classmethod
    def kinds(cls) -> list[type[PushTarget]]:
        return list(cls._kinds.values())

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
    def secrets(cls) -> tuple[str, ...]:
        """Values that must never appear in a log line, a record or an error."""
        return ()

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
    """`text` with every secret a push target holds blanked out: error messages end up in
    logs and records."""
    for kind in PushTarget.kinds():
        try:
            redact.register(*kind.secrets())
        except Exception:  # scrubbing must never raise; the token-shaped regex still applies
            continue
    return redact.scrub(text)


def one_line(exc: BaseException) -> str:
    """An exception as one scrubbed line, for records and progress lines."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if len(text) > 300:
        text = text[:297] + "..."
    return scrub(f"{type(exc).__name__}: {text}")
