"""The watcher's own read of a run's final weights, before it destroys the box that holds them.

A lease that says `final_verified` is the box's word; a destroy cannot be taken back. So the
watcher downloads each file the sealed lease lists (`final_weights`) from the run's repo at the
commit it judged, hashes the bytes it received and compares them with the lease's size and
sha256. Bounded: never more bytes than the lease says (and MAX_BYTES in all), and within a total
time. Anything short of every file read and matching means no destroy (a stop instead, where
the provider can stop).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from runspec.hubreach import endpoint_set
from runspec.push.base import one_line
from runspec.push.manifest import Manifest
from runspec.watch.leasefields import MAX_WEIGHTS, WEIGHT

MAX_BYTES = 20 * 1024**3  # more than this is read back by the box's own push, not a watcher
TOTAL_S = 1800.0
CHUNK = 1 << 20


def final_weights(pushed: Path) -> dict[str, Any] | None:
    """The box's side: the weights of its last verified push (its manifest's copy in the job
    folder), as the lease lists them for a watcher to read back; None when there are none."""
    try:
        manifest = Manifest.load(pushed)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if manifest is None:
        return None
    found = {
        e.path: {"size": e.size, "sha256": e.sha256}
        for e in manifest.entries
        if WEIGHT.match(e.path) and ".." not in e.path
    }
    return dict(sorted(found.items())[:MAX_WEIGHTS]) or None


def _read(url: str, size: int, until: float) -> tuple[int, str]:
    from huggingface_hub.utils import build_hf_headers, get_session

    digest, got = hashlib.sha256(), 0
    headers = {**build_hf_headers(), "Accept-Encoding": "identity"}
    with get_session().stream(
        "GET", url, headers=headers, follow_redirects=True, timeout=60.0
    ) as resp:
        if resp.status_code != 200:
            raise OSError(f"HTTP {resp.status_code}")
        for chunk in resp.iter_raw(CHUNK):
            got += len(chunk)
            if got > size:
                raise OSError(f"more than the lease's {size} bytes")
            if time.monotonic() > until:
                raise OSError("not read within the watcher's time")
            digest.update(chunk)
    return got, digest.hexdigest()


def unread_weights(repo: str, commit: str, weights: dict[str, Any] | None) -> str | None:
    """None when every file the lease lists was read from `repo` at `commit` and matched;
    else why not, in words."""
    from huggingface_hub import hf_hub_url

    if not weights:
        return "the lease lists no final weights to read back"
    total = sum(int(entry["size"]) for entry in weights.values())
    if total > MAX_BYTES:
        return f"the final weights ({total} bytes) are over what a watcher reads back"
    until = time.monotonic() + TOTAL_S
    for path, entry in sorted(weights.items()):
        url = hf_hub_url(repo, path, revision=commit, endpoint=endpoint_set())
        try:
            size, sha256 = _read(url, int(entry["size"]), until)
        except Exception as exc:  # the network's, the Hub's or the file's: not read back
            return f"{path} could not be read back: {one_line(exc)}"
        if (size, sha256) != (entry["size"], entry["sha256"]):
            return f"{path} at {commit[:12]} is not the weights the lease names"
    return None
