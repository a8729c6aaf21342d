"""One followed repository as `follow:` in runspecd.yaml names it (runspec.daemon.follow reads
it); apart, so reading the config loads nothing of the follower's machinery."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from runspec.daemon.gitmirror import shown_remote


@dataclass(frozen=True)
class FollowSpec:
    repo: str
    branch: str = "main"
    path: str = "specs"
    every: float = 60.0

    @property
    def key(self) -> str:
        return hashlib.sha256(f"{self.repo}\0{self.branch}".encode()).hexdigest()[:16]

    @property
    def shown(self) -> str:
        return f"{shown_remote(self.repo)}@{self.branch}:{self.path}"
