"""The commands runspec tells a person to run next, written so that they work when pasted: with
`--state` when the state folder is not the one a bare command would use."""

from __future__ import annotations

import shlex
from pathlib import Path

from runspec.store.paths import default_state_dir


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a.absolute() == b.absolute()


def command(words: str, state: Path) -> str:
    """`runspec WORDS`, with `--state STATE` unless a bare command reads that folder already
    (the default, or RUNSPEC_STATE's)."""
    if _same(state, default_state_dir()):
        return f"runspec {words}"
    return f"runspec {words} --state {shlex.quote(str(state))}"
