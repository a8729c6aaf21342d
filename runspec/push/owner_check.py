"""Whose run a push target already holds: a second run must not replace another's card,
spec, record and weights because its spec was copied with only `name:` changed.

The pushed manifest (`runspec/manifest.json`, in every push) names the run that wrote it, and
the final push's `runspec/record.json` names it too. Either naming another run refuses the
target unless the spec says `push.hub.reuse: true`.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from runspec.printable import printable
from runspec.push import remote

# The two files are a few kilobytes; a target answering more is not telling a run's name.
MAX_BYTES = 1 << 20
OWNER_FILES = ((remote.MANIFEST, "run"), (remote.RECORD, "name"))

Reader = Callable[[str], bytes | None]  # a target path's bytes, None when it is not there


def holder(read: Reader) -> str | None:
    """The name of the run whose files the target holds; None when it holds no run's files
    (or none that can be read as such: a hand-made repo, a damaged file)."""
    for path, key in OWNER_FILES:
        data = read(path)
        if not data or len(data) > MAX_BYTES:
            continue
        try:
            value = json.loads(data).get(key)
        except (ValueError, AttributeError):
            continue
        if isinstance(value, str) and value:
            return value
    return None


def held_elsewhere(where: str, name: str, read: Reader) -> str | None:
    """Why `name` may not push to `where`; None when the target holds no other run."""
    other = holder(read)
    if other is None or other == name:
        return None
    return (
        f"{where} holds another run, {printable(other)!r}: pushing {name!r} there would "
        "replace its model card, spec, record and its weights of the same names"
    )


REUSE_FIX = "push to another repo (push.hub.repo), or set push.hub.reuse: true to share it"
