"""The lease's seal: what binds a lease to one run, one repo and one box.

Anyone who can write to a repo tagged `runspec` in the org can write a `runspec/lease.json`, so
a lease proves nothing by being there. The box and the watcher share a watch key
(`RUNSPEC_WATCH_KEY`: in the box's `/etc/runspec/env` and in the watcher's environment, never
in a repo or a spec). Each run's own key is derived from it, bound to the repo id and the run's
name; the seal is an HMAC-SHA256 with that key over the repo id and every field of the lease
(provider, instance, region, times, state, `final_verified`, `ended_by`). A lease moved to
another repo, naming another instance, or edited in any field no longer proves; a box's key
never leaves the box and the watcher, and the trainer's environment never holds it
(runspec.secrets.secretenv drops any *_KEY).

A watcher acts only on a lease it can prove. Without a key on either side every lease is
unproven: the watcher reports it and calls nothing (fail closed).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from typing import Any

KEY_VARIABLE = "RUNSPEC_WATCH_KEY"
MIN_KEY_CHARS = 32  # `openssl rand -hex 32` gives 64
_CONTEXT = b"runspec-lease-v1\0"


def watch_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The shared watch key from the environment; None when unset or too short to be one."""
    value = (os.environ if environ is None else environ).get(KEY_VARIABLE, "")
    return value.encode() if len(value) >= MIN_KEY_CHARS else None


def key_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why the environment's watch key cannot seal a lease, in words; None when it can."""
    value = (os.environ if environ is None else environ).get(KEY_VARIABLE, "")
    if not value:
        return f"{KEY_VARIABLE} is not set"
    if len(value) < MIN_KEY_CHARS:
        return f"{KEY_VARIABLE} is shorter than {MIN_KEY_CHARS} characters"
    return None


def _run_key(key: bytes, repo: str, run: str) -> bytes:
    return hmac.new(key, _CONTEXT + repo.encode() + b"\0" + run.encode(), hashlib.sha256).digest()


def _body(repo: str, fields: Mapping[str, Any]) -> bytes:
    unsealed = {k: v for k, v in fields.items() if k != "seal"}
    text = json.dumps({"repo": repo, "lease": unsealed}, sort_keys=True, separators=(",", ":"))
    return text.encode()


def seal(key: bytes, repo: str, fields: Mapping[str, Any]) -> str:
    """The seal of a lease's fields (its `seal` left out) as it sits in `repo`."""
    run = str(fields.get("run", ""))
    return hmac.new(_run_key(key, repo, run), _body(repo, fields), hashlib.sha256).hexdigest()


def proves(key: bytes | None, repo: str, fields: Mapping[str, Any]) -> bool:
    """Whether `fields` (a lease as read, its `seal` among them) were sealed for `repo` with
    this key."""
    found = fields.get("seal")
    if key is None or not isinstance(found, str):
        return False
    return hmac.compare_digest(found, seal(key, repo, fields))
