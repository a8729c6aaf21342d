"""What `runspec run` says when it exits and leaves the run's failsafe armed (the run did not
end, or its machine's end was never confirmed): which watcher or timer, when it fires, what it
does then, and how to disarm it. Read from the job folder only."""

from __future__ import annotations

import json

from runspec.identity import ProcessIdentity
from runspec.store.paths import RunPaths


def left_armed(paths: RunPaths) -> str | None:
    """The line, or None when no failsafe is left armed for the run."""
    try:
        state = json.loads(paths.failsafe_file.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not state.get("armed"):
        return None
    at = state.get("fire_at") or "its deadline"
    if state.get("unit") != "watcher":
        timer = f"{state.get('unit')}.timer"
        return f"failsafe: left armed: {timer} fires at {at}; to disarm it: systemctl stop {timer}"
    try:
        ident = ProcessIdentity.from_json(json.loads(paths.failsafe_watch.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not ident.alive():
        return None
    detail = str(state.get("detail") or "").removeprefix("no systemd here: a detached watcher ")
    return f"failsafe: left armed: watcher pid {ident.pid} {detail}; to disarm it: kill {ident.pid}"
