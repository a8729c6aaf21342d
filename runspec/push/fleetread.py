"""Reading an organisation's runs from the Hub alone, for `runspec status --hub ORG` (a laptop
with nothing but a token: no server, no machine to log in to).

Every run's repo carries the `runspec` tag from its first push (its first card) and its record
(`runspec/record.json`, with every push). The listing is one `list_models(author=ORG,
filter="runspec")` with each repo's head commit; each record is then read at that commit and
kept in the user's cache under the commit's sha, so a repo that did not change costs no
download. The pushed provenance says which commit of which spec the run came from, and the
receipt (after the final push) what it was billed, and the end's confirmation beside it
(`runspec/end.json`, runspec.push.endconfirm) that the machine's stop or destroy was seen done.
A watcher's lease beside it (`runspec/lease.json`, issue 22's `runspec watch`) says when a box
was stopped by the watch, and why.
"""

from __future__ import annotations

import json
import os
import re
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

from runspec.errors import RunspecError
from runspec.hubreach import endpoint_set
from runspec.hubread import HostileFile, HubReadError, file_json, within
from runspec.push.base import one_line
from runspec.push.remote import END, LEASE, PROVENANCE, RECEIPT, RECORD
from runspec.store.atomic import write_json_atomic
from runspec.views.hubfleet import TAG, row

_SHA = re.compile(r"^[0-9a-f]{40}$")
LIST_S = 120.0  # the total time the org's listing may take, however slowly it is served
MAX_REPOS = 10_000


def cache_dir() -> Path:
    """Where read records are kept: the user's cache folder (XDG_CACHE_HOME, else ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "runspec" / "hub"


def _read_at(repo: str, sha: str) -> dict[str, Any]:
    """The record and the lease of `repo` at commit `sha` (None where absent), each read by the
    one capped, strict reader of Hub files; a file it refuses is named under "unreadable"."""
    found: dict[str, Any] = {}
    files = (
        ("record", RECORD),
        ("lease", LEASE),
        ("provenance", PROVENANCE),
        ("receipt", RECEIPT),
        ("end", END),
    )
    for key, path in files:
        try:
            value = file_json(repo, path, sha)
        except HostileFile as exc:
            found.setdefault("unreadable", {})[key] = str(exc)
            value = None
        except HubReadError:
            value = None
        found[key] = value if isinstance(value, dict) else None
    return found


def _cached(repo: str, sha: str, cache: Path) -> tuple[dict[str, Any], bool]:
    """What `_read_at` gives, from the cache when this commit was read before; and whether
    it came from there."""
    if not _SHA.match(sha):
        return {}, False  # no commit to read at: nothing read
    path = cache / repo.replace("/", "--") / f"{sha}.json"
    try:
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "end" in data:  # one an older runspec kept has no end
            return data, True
    except (OSError, ValueError):
        pass
    data = _read_at(repo, sha)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, data)
    except OSError:
        pass  # a read-only cache costs a download next time, nothing else
    return data, False


def fleet(org: str, now: float, cache: Path | None = None) -> list[dict[str, Any]]:
    """One row per run repo of `org`."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint_set())
    try:
        listing = partial(api.list_models, author=org, filter=TAG, expand=["sha", "lastModified"])
        models = within(LIST_S, f"listing {org}", lambda: list(islice(listing(), MAX_REPOS)))
    except Exception as exc:  # the network's or the Hub's: said in one line
        raise RunspecError(f"cannot list {org}'s runs on the Hub: {one_line(exc)}") from exc
    rows = []
    for model in models:
        sha = str(model.sha or "")
        data, hit = _cached(model.id, sha, cache or cache_dir())
        rows.append(row(model.id, sha, data, now, hit))
    return rows
