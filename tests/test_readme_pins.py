"""The version people are told to pin is the project's own, and the tag names it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_every_pin_the_readme_gives_is_the_projects_version_tag() -> None:
    found = re.search(r'^version = "([^"]+)"$', (REPO / "pyproject.toml").read_text(), re.M)
    assert found is not None
    version = found.group(1)
    readme = (REPO / "README.md").read_text()
    pins = set(re.findall(r"runspec@(v[\w.]+)", readme))
    pins |= set(re.findall(r"\brev: ([^`\s]+)", readme))
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text()
    pins |= set(re.findall(r"rev: (v[\w.]+)", hooks))
    assert pins == {f"v{version}"}, pins
    # Where the checkout has its tags (a fresh clone does), the tag is there to pin.
    tags = subprocess.run(
        ["git", "-C", str(REPO), "tag", "--list", "v*"], capture_output=True, text=True, check=False
    ).stdout.split()
    assert not tags or f"v{version}" in tags, tags  # a shallow clone has none to check
