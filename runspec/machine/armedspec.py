"""The spec a failsafe is armed with, and the refusal of any other.

Outside systemd a trainer reaches its job folder, and so the spec.yaml there: the failsafe's
own command line (the timer's, the watcher's) names the sha256 of the spec it was armed with,
which nothing on the box can rewrite, and firing acts on that spec or on none.
"""

from __future__ import annotations

import hashlib

from runspec.spec.model import Spec


def armed_sha256(spec: Spec) -> str | None:
    """The sha256 of the spec.yaml the run was accepted with: of the text accept wrote there
    (a byte order mark the file came with is not in it), which is the file's when it is read
    back. None for a spec without its text."""
    return hashlib.sha256(spec.text.encode("utf-8")).hexdigest() if spec.text else None


def armed_with(spec: Spec) -> list[str]:
    """The spec the failsafe is armed with, by its sha256 on its own command line: the one copy
    nothing on the box can rewrite (a trainer outside systemd reaches the job folder)."""
    digest = armed_sha256(spec)
    return [f"--spec-sha256={digest}"] if digest else []


def changed_since_armed(spec: Spec, armed: str | None) -> str | None:
    """Why the job folder's spec is not the one the failsafe was armed with, or None. Its
    finish (a command run as root with the provider's keys at hand), its notify URLs and its
    push target would all be someone else's: nothing of it is acted on."""
    if not armed or spec.sha256 == armed:
        return None
    return (
        f"its spec.yaml changed since the failsafe was armed (sha256 {spec.sha256[:12]}, armed "
        f"with {armed[:12]}): nothing applied, for something on this machine rewrote "
        "it. End the machine through the provider's console, and look at what ran there"
    )
