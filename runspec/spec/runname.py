"""A run's name: the one rule (the spec's `name`) every command that takes a NAME obeys.

A name becomes a folder under `<state>/jobs` and `<state>/runs`; a command given `..`, `.`,
`''` or `/some/dir` would otherwise reach outside them (`runspec rm ..` once removed the whole
state folder). So a NAME is checked against the spec's own rule before anything touches the
disk, and the schema's pattern is this one (tests/test_names_rule.py holds them together).
"""

from __future__ import annotations

import argparse
import re

# fullmatch, never `$`: Python's `$` also matches before a trailing newline.
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
NAME_RULE = "1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"


def name_problem(text: str) -> str | None:
    """Why `text` is not a run's name; None when it is."""
    if NAME.fullmatch(text):
        return None
    return f"{text!r} is not a run's name: a name is {NAME_RULE}"


def run_name(text: str) -> str:
    """argparse's `type=` for a NAME: refused (exit 2, saying why) before any command runs."""
    problem = name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text
