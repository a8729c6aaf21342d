"""What a verified push proves about its weights: which bytes were read back from the target.

Every target's `verify` hashes the bytes it serves of each file the push sent whose record it
did not compute itself (the Hub's LFS and Xet files, whose sha256 is the client's declaration;
every file of a folder). A final push that asks for it (`push.verify: readback`, the default
before a destroy) also reads back the weights it did not send, pushed earlier: the target must
still serve them. Only then is its manifest marked read back, which spares it the machine-wide
read-back before a destroy (machine/readback.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from runspec.push.base import PushFailed, StagedFile
from runspec.push.lost import forget_lost
from runspec.push.manifest import Manifest, ManifestEntry

if TYPE_CHECKING:
    from runspec.push.pusher import Pusher


def read_back_rest(
    pusher: Pusher, commit: str | None, manifest: Manifest, uploads: Sequence[StagedFile]
) -> tuple[Manifest, list[str]]:
    """The manifest (marked read back where it is) and what did not read back (empty: fine).
    Called once `verify` passed, so the weights this push sent were read back already."""
    push, verified = pusher.spec.push, pusher.verified
    if not (manifest.final and push is not None and push.read_back):
        return manifest, []
    sent = {item.entry.path for item in uploads}
    before = verified.by_path() if verified is not None and verified.read_back else {}
    weights = [e for e in manifest.entries if e.path.startswith("weights/")]
    rest = [e for e in weights if e.path not in sent and before.get(e.path) != e]
    problems = [f"read-back: {p}" for p in pusher.target.read_back(commit, rest)] if rest else []
    if problems:
        return manifest, problems
    pusher.progress(f"read back {len(weights)} weights files: the bytes match")
    return dataclasses.replace(manifest, read_back=True), []


def proven(
    pusher: Pusher,
    commit: str | None,
    manifest: Manifest,
    ours: Sequence[ManifestEntry],
    uploads: list[StagedFile],
    what: str,
) -> Manifest:
    """The push's manifest once the target proved it (`verify`, then the final's read-back of
    what it did not send); else the files the target lost are forgotten, to be sent again, and
    PushFailed says what was not verified."""
    problems = pusher.target.verify(commit, [*manifest.entries, *ours], uploads)
    if not problems:  # the bytes sent were read back; the final reads what was not yet
        manifest, problems = read_back_rest(pusher, commit, manifest, uploads)
    if not problems:
        return manifest
    pusher.verified = forget_lost(
        pusher.verified,
        pusher.verified_file,
        pusher.stager,
        manifest,
        uploads,
        problems,
        pusher.progress,
    )
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    where = pusher.target.description
    raise PushFailed(f"push of {what} to {where} NOT verified: {problems[0]}{more}")
