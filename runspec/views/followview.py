"""`runspec status`'s lines for the repositories the daemon follows (runspec.daemon.follow
writes what each read came to): where each branch stands, a repository that cannot be read,
and each spec that was refused, with its position."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runspec.store.paths import StateLayout


def read_status(state: Path) -> dict[str, Any]:
    """What each followed repository came to at its last read ({} when none is followed)."""
    try:
        loaded = json.loads(StateLayout(state).follow_status.read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def following(state: Path) -> list[str]:
    lines = []
    for item in read_status(state).values():
        if not isinstance(item, dict):
            continue
        where = f"{item.get('repo')}@{item.get('branch')}:{item.get('path')}"
        if item.get("error"):
            lines.append(f"following {where}: cannot read it ({item['error']}), retrying")
        else:
            commit = str(item.get("commit") or "")[:12]
            lines.append(
                f"following {where}: at {commit}, {item.get('specs', 0)} specs, "
                f"read {item.get('read_at')}"
            )
        rejected = item.get("rejected")
        for why in rejected.values() if isinstance(rejected, dict) else ():
            lines.append(f"  refused: {why}")
    return lines
