"""What a push claims: each file's size, sha256, epoch and time, and how to hash a file.

The manifest travels with the weights (`runspec/manifest.json` in the target) and a copy of
the last verified one stays in the job folder, so an unchanged file is never uploaded twice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from runspec.clock import utc_iso
from runspec.push.remote import MANIFEST
from runspec.store.atomic import write_json_atomic

CHUNK = 1 << 20
# The Hub stores files over 10 MB (or binary ones) in LFS and reports their sha256; smaller
# text files are plain git blobs, checked by blob id. Computing the blob id of a big file
# would cost a second hash pass for nothing.
BLOB_ID_LIMIT = 10 * 1000 * 1000


@dataclass(frozen=True)
class Digest:
    size: int
    sha256: str
    blob_id: str | None  # git's sha1 of b"blob <size>\0" + data; None for big files


def digest_file(path: Path) -> Digest:
    """Hash a file in one streaming pass (memory does not grow with its size)."""
    size = path.stat().st_size
    sha256 = hashlib.sha256()
    sha1 = hashlib.sha1(b"blob %d\0" % size) if size < BLOB_ID_LIMIT else None
    read = 0
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            read += len(chunk)
            sha256.update(chunk)
            if sha1 is not None:
                sha1.update(chunk)
    if read != size:
        raise OSError(f"{path} changed size while it was hashed")
    return Digest(size=size, sha256=sha256.hexdigest(), blob_id=sha1.hexdigest() if sha1 else None)


@dataclass(frozen=True)
class ManifestEntry:
    path: str  # in the target, e.g. "weights/last.pt" or "runspec/spec.yaml"
    size: int
    sha256: str
    epoch: int | None
    time: str  # when this content was staged (UTC)
    blob_id: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ManifestEntry:
        return cls(
            path=str(data["path"]),
            size=int(data["size"]),
            sha256=str(data["sha256"]),
            epoch=data.get("epoch"),
            time=str(data.get("time", "")),
            blob_id=data.get("blob_id"),
        )


@dataclass(frozen=True)
class Manifest:
    run: str
    epoch: int | None
    time: str
    final: bool
    entries: tuple[ManifestEntry, ...]
    read_back: bool = False  # its weights were read back from the target and matched

    def by_path(self) -> dict[str, ManifestEntry]:
        return {e.path: e for e in self.entries}

    @classmethod
    def of(
        cls,
        run: str,
        verified: dict[str, ManifestEntry],
        staged: list[ManifestEntry],
        now: float,
        final: bool,
    ) -> Manifest:
        """A push's manifest: what was verified before, with the files staged now over it
        (never the manifest itself); its epoch is the newest weights file's."""
        entries = {**verified, **{e.path: e for e in staged}}
        entries.pop(MANIFEST, None)
        epochs = [e.epoch for p, e in entries.items() if p.startswith("weights/") and e.epoch]
        return cls(
            run=run,
            epoch=max(epochs) if epochs else None,
            time=utc_iso(now),
            final=final,
            entries=tuple(sorted(entries.values(), key=lambda e: e.path)),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "epoch": self.epoch,
            "time": self.time,
            "final": self.final,
            "read_back": self.read_back,
            "files": [asdict(e) for e in sorted(self.entries, key=lambda e: e.path)],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        return cls(
            run=str(data.get("run", "")),
            epoch=data.get("epoch"),
            time=str(data.get("time", "")),
            final=bool(data.get("final", False)),
            entries=tuple(ManifestEntry.from_json(e) for e in data.get("files", [])),
            read_back=data.get("read_back") is True,
        )

    def write(self, path: Path) -> None:
        # 0644: it is published anyway, and contains nothing secret.
        write_json_atomic(path, self.to_json(), mode=0o644)

    @classmethod
    def load(cls, path: Path) -> Manifest | None:
        try:
            return cls.from_json(json.loads(path.read_text()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return None  # unreadable: treat as nothing verified, so everything is pushed again
