"""The local Hub's data: repos with their commit history, file entries, faults, the request log."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

LFS_THRESHOLD = 10 * 1000 * 1000  # the Hub sends files over 10 MB (or binary ones) to LFS
CHUNK = 1 << 20
OPS = (
    "create_repo",
    "repo_info",
    "preupload",
    "lfs_batch",
    "lfs_put",
    "commit",
    "tree",
    "paths_info",
    "resolve",
    "xet_token",
    "xet_bridge",
    "commits",
)


def blob_id(data: bytes) -> str:
    """The git blob id, which the Hub reports as `oid` for regular files."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class Entry:
    path: str
    size: int
    oid: str  # git blob id (regular) or the pointer's blob id (LFS)
    sha256: str | None = None  # set for LFS files
    data: bytes | None = None  # regular files only
    xet_hash: str | None = None  # stored through Xet (tests/hubxet.py): its content hash there

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "type": "file",
            "path": self.path,
            "oid": self.oid,
            "size": self.size,
        }
        if self.sha256 is not None:
            out["lfs"] = {"oid": self.sha256, "size": self.size, "pointerSize": 134}
        if self.xet_hash is not None:
            out["xetHash"] = self.xet_hash  # as the Hub lists a Xet file (hf_api.py:712-719)
        return out


@dataclass
class Repo:
    repo_id: str
    repo_type: str
    private: bool
    commits: list[tuple[str, dict[str, Entry], str]] = field(default_factory=list)
    times: dict[str, float] = field(default_factory=dict)  # each commit's time, the Hub's clock
    authors: dict[str, str] = field(default_factory=dict)  # who made a commit, where seeded

    @property
    def head(self) -> dict[str, Entry]:
        return self.commits[-1][1] if self.commits else {}

    @property
    def sha(self) -> str:
        return self.commits[-1][0] if self.commits else "0" * 40

    def at(self, revision: str) -> tuple[str, dict[str, Entry]] | None:
        if revision in ("main", "HEAD"):
            return self.sha, self.head
        for oid, files, _msg in self.commits:
            if oid == revision:
                return oid, files
        return None


@dataclass
class Fault:
    mode: str  # "500", "drop" or "echo"
    times: int
    status: int = 400  # what an "echo" answers
    method: str | None = None  # only requests with this method (None: any)
    where: str | None = None  # only requests whose path holds this (None: any)


@dataclass
class Flaky:
    """A share of every request fails (`HubServer.flaky`): an incident of the Hub's."""

    rate: float
    mode: str  # "500", or "429" with a Retry-After of `retry_after` seconds
    retry_after: int
    rng: random.Random


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    op: str
    status: int  # 0 when the connection was dropped
    bytes_in: int


def lfs_entry(path: str, sha256: str, size: int, xet_hash: str | None = None) -> Entry:
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n"
    return Entry(path, size, blob_id(pointer.encode()), sha256=sha256, xet_hash=xet_hash)
