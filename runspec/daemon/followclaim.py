"""The claim that a followed spec blob has run, kept at the run's own push target, so a second
box following the same branch, or a daemon on a fresh disk, never runs it twice.

One small file per blob, `runspec/claims/<key>.json` (the key: a hash of the repository, the
path and the blob sha), written before the spec is queued: in a push folder with an exclusive
create, at the Hub with its optimistic lock (`create_commit(parent_commit=...)`, a 412 when the
branch moved: read again), so of two boxes one claims and the other reads the claim. The claim
names the box that made it (a hash of the machine id and the state folder, nothing more), so
the box that claimed and then restarted before queuing goes on. A spec with no push target
has only the box's own ledger.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from runspec.errors import RunspecError
from runspec.hubreach import endpoint_set
from runspec.hubread import file_json
from runspec.hubread import head as hub_head
from runspec.push.base import http_status, one_line
from runspec.push.remote import CLAIMS
from runspec.spec.model import Spec
from runspec.store.paths import StateLayout

TRIES = 5  # reads and commits before a claim race is left to the next poll
MAX_BYTES = 64 * 1024  # a claim in a push folder, read back


class ClaimError(RunspecError):
    """The claim could not be read or made: nothing is queued, and the next poll tries again."""


def box_id(state: Path) -> str:
    try:
        machine = Path("/etc/machine-id").read_text().strip()
    except OSError:
        machine = ""
    return hashlib.sha256(f"{machine}\0{state.absolute()}".encode()).hexdigest()[:16]


def claim_path(repo: str, path: str, blob: str) -> str:
    key = hashlib.sha256(f"{repo}\0{path}\0{blob}".encode()).hexdigest()[:32]
    return f"{CLAIMS}/{key}.json"


def claim(spec: Spec, state: Path, body: dict[str, Any], known: bool = True) -> str | None:
    """Claim the blob `body` names for this box: None when it is this box's (now, or before
    when the box's ledger still `known`s it: a claim made before a restart), else who claimed
    it when. Raises ClaimError when the target cannot tell."""
    body = {**body, "box": box_id(state)}
    rel = claim_path(body["repo"], body["path"], body["blob"])
    if spec.push is None:
        return None
    if spec.push.dir is not None:
        folder = StateLayout(state).run_paths(spec.name).resolve(spec.push.dir) / spec.name
        return _claim_dir(folder / rel, body, known)
    assert spec.push.hub is not None
    return _claim_hub(spec.push.hub.repo, spec.push.hub.private, rel, body, known)


def _theirs(found: Any, box: str, known: bool) -> str | None:
    when = found.get("at") if isinstance(found, dict) else None
    if isinstance(found, dict) and found.get("box") == box:
        return None if known else f"ran already from this box at {when}"
    return f"claimed already at {when or 'an unknown time'} by another box"


def _claim_dir(file: Path, body: dict[str, Any], known: bool) -> str | None:
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        try:
            found = json.loads(file.read_bytes()[:MAX_BYTES])
        except (OSError, ValueError):
            found = None
        return _theirs(found, body["box"], known)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "claimed by a link in the push folder: refused"
        raise ClaimError(f"cannot claim it in {file.parent}: {exc.strerror or exc}") from exc
    with os.fdopen(fd, "w") as out:
        json.dump(body, out)
    return None


def _claim_hub(repo: str, private: bool, rel: str, body: dict[str, Any], known: bool) -> str | None:
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=endpoint_set())
    data = json.dumps(body).encode()
    for _ in range(TRIES):
        try:
            head = hub_head(repo)  # read through the one capped reader of Hub files
            if head is None:
                api.create_repo(repo, repo_type="model", private=private, exist_ok=True)
                continue
            empty = not head.strip("0")  # a repo with no commit yet
            if not empty and (found := file_json(repo, rel, head)) is not None:
                return _theirs(found, body["box"], known)
            api.create_commit(
                repo,
                operations=[CommitOperationAdd(path_in_repo=rel, path_or_fileobj=data)],
                commit_message=f"runspec: claim {body['path']} at {body['commit'][:12]}",
                parent_commit=None if empty else head,
            )
            return None
        except Exception as exc:  # the lock's refusal: read again; the rest: next poll
            if http_status(exc) == 412:
                continue
            raise ClaimError(f"cannot claim it at hub {repo}: {one_line(exc)}") from exc
    raise ClaimError(f"hub {repo} moved {TRIES} times while claiming: the next read tries again")
