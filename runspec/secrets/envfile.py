"""The daemon's environment file (`/etc/runspec/env`, 0600): where secrets live.

Under systemd the unit's `EnvironmentFile=` reads it. Started any other way (a container's
start script, `runspec daemon --detach`), the daemon reads the same file itself, in the same
`KEY=VALUE` format, so the finish and the failsafe find the provider's key either way.
Variables already in the environment win, as a unit's `Environment=` would.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("runspec.secrets.envfile")


def started_by_systemd() -> bool:
    """systemd sets INVOCATION_ID for every unit it starts (v232 and later)."""
    return bool(os.environ.get("INVOCATION_ID"))


def parse(text: str) -> dict[str, str]:
    """systemd's EnvironmentFile= format: KEY=VALUE lines, # comments, optional quotes."""
    found: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        key, sep, value = line.partition("=")
        key = key.strip().removeprefix("export ").strip()
        if not sep or not key.replace("_", "").isalnum():
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        found[key] = value
    return found


def load(path: Path) -> list[str]:
    """Add the file's variables to this process's environment; the names added."""
    try:
        st = path.stat()
        text = path.read_text()
    except FileNotFoundError:
        return []
    except OSError as exc:
        log.warning("cannot read the environment file %s: %s", path, exc)
        return []
    if stat.S_IMODE(st.st_mode) & 0o077:
        log.warning("%s holds secrets but others may read it: chmod 600 %s", path, path)
    added = []
    for key, value in parse(text).items():
        if key not in os.environ:
            os.environ[key] = value
            added.append(key)
    return added
