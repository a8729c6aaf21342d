"""The follow ledger's bound: each followed repository keeps its newest LEDGER_KEEP entries.

An entry is forgotten only where forgetting it can run nothing twice: a blob on the branch now,
one mid-drop, or one queued without a push target (the ledger is then the only record that it
ran) is always kept. A blob queued with a push target is claimed there (runspec.daemon.
followclaim), and that claim outlives the entry: a forgotten blob that comes back is read as
ran already. A refused or elsewhere-claimed blob that comes back is judged again, as it was.
"""

from __future__ import annotations

from typing import Any

LEDGER_KEEP = 500  # entries per followed repository


def _forgettable(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return True
    state = entry.get("state")
    return state in ("rejected", "elsewhere") or (state == "queued" and bool(entry.get("claimed")))


def prune(blobs: dict[str, Any], prefix: str, present: set[tuple[str, str]], keep: int) -> None:
    """Drop the oldest forgettable entries of the repository whose keys start with `prefix`
    until it holds at most `keep` (`present`: its (path, blob) pairs on the branch now)."""
    mine = [k for k in blobs if k.startswith(prefix)]
    if len(mine) <= keep:
        return

    def now_present(key: str) -> bool:
        _repo, path, blob = key.split("\0", 2)
        return (path, blob) in present

    candidates = [k for k in mine if _forgettable(blobs[k]) and not now_present(k)]
    candidates.sort(key=lambda k: str(blobs[k].get("at", "")) if isinstance(blobs[k], dict) else "")
    for key in candidates[: len(mine) - keep]:
        del blobs[key]
