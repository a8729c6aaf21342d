"""Where a machine that is not this one gets runspec from (an engine's job, the watcher's HF
scheduled job): a direct reference only. The name runspec on PyPI belongs to another project;
`pip install runspec` there would run a stranger's code beside the Hub token and the keys."""

from __future__ import annotations

import re

from runspec import __version__
from runspec.spec.secreturls import login_in

INSTALL_VARIABLE = "RUNSPEC_INSTALL"
INSTALL_EXAMPLE = f"runspec[train] @ git+https://github.com/ORG/runspec@v{__version__}"
_DIRECT = re.compile(r"^(?:[A-Za-z0-9._-]+(?:\[[A-Za-z0-9_,-]+\])?\s*@\s*)?(?:git\+)?https://\S+$")


def install_problem(
    requirement: str | None, given: str = f"--install (or {INSTALL_VARIABLE})"
) -> str | None:
    """Why the requirement cannot install runspec on the other machine; None when it can.
    `given`: how the person gives it, for the message."""
    if not requirement:
        return (
            f"say where the other machine gets runspec: {given} with a direct reference, "
            f"e.g. {INSTALL_EXAMPLE!r}"
        )
    if not _DIRECT.match(requirement):
        return (
            f"{given.split(maxsplit=1)[0]} {requirement!r} is not a direct reference (an https "
            "or git+https URL): "
            "the name runspec on PyPI is another project's; use e.g. "
            f"{INSTALL_EXAMPLE!r}"
        )
    if login_in(requirement):
        return (
            f"{given.split(maxsplit=1)[0]}: the URL carries a login, which would be written "
            "in cleartext into the engine's task, the job and git: install from a public URL, "
            "or write the token as ${NAME} and give NAME to the engine as a secret"
        )
    return None
