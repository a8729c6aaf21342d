"""Whose run a push target already holds, and whether the token may write there at all: a
second run must not replace another's card, spec, record and weights because its spec was
copied with only `name:` changed, and a token whose role in the org is `read` cannot push.

The pushed manifest (`runspec/manifest.json`, in every push) names the run that wrote it, and
the final push's `runspec/record.json` names it too. Either naming another run refuses the
target unless the spec says `push.hub.reuse: true`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from runspec.hubread import HostileFile, strict_json
from runspec.printable import printable
from runspec.push import remote

# The two files are a few kilobytes; a target answering more is not telling a run's name.
MAX_BYTES = 1 << 20
OWNER_FILES = ((remote.MANIFEST, "run"), (remote.RECORD, "name"))

Reader = Callable[[str], bytes | None]  # a target path's bytes, None when it is not there


def holder(read: Reader) -> str | None:
    """The name of the run whose files the target holds; None when it holds no run's files
    (or none that can be read as such: a hand-made repo, a damaged file)."""
    for path, key in OWNER_FILES:
        data = read(path)
        if not data or len(data) > MAX_BYTES:
            continue
        try:
            value = json.loads(data).get(key)
        except (ValueError, AttributeError):
            continue
        if isinstance(value, str) and value:
            return value
    return None


def held_elsewhere(where: str, name: str, read: Reader) -> str | None:
    """Why `name` may not push to `where`; None when the target holds no other run."""
    other = holder(read)
    if other is None or other == name:
        return None
    return (
        f"{where} holds another run, {printable(other)!r}: pushing {name!r} there would "
        "replace its model card, spec, record and its weights of the same names"
    )


REUSE_FIX = "push to another repo (push.hub.repo), or set push.hub.reuse: true to share it"


def _record(read: Reader) -> dict[str, Any] | None:
    data = read(remote.RECORD)
    if not data or len(data) > MAX_BYTES:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _ledger_names(read: Reader, name: str, ours: dict[str, Any]) -> bool:
    """Whether the target's attempt ledger names this run as this attempt's gate admitted it
    (runspec.run.attemptgate, which decides a task's identity: it sets GATED_TASK): its name,
    its spec and the engine's task id. A stray ledger, or one of another run, names nothing,
    and no ledger stands for a run outside an engine."""
    gated = os.environ.get(remote.GATED_TASK)
    data = read(remote.ATTEMPTS) if gated is not None else None
    if not data or len(data) > MAX_BYTES:
        return False
    try:
        ledger = strict_json(data)  # as the gate read it (runspec.run.attempts)
    except HostileFile:
        return False
    if not isinstance(ledger, dict) or ledger.get("run") != name:
        return False
    sha = ours.get("spec_sha256")
    return (sha is None or ledger.get("spec_sha256") == sha) and (
        ledger.get("task_id") or ""
    ) == gated


def earlier_run(where: str, name: str, ours: dict[str, Any] | None, read: Reader) -> str | None:
    """Why the run `name`, whose record is `ours` (None: not accepted yet), may not push to
    `where`: the target's record is of an earlier run of the same name (`runspec rm` freed
    the name and a new run took it). A run that pushed before (its record has a last push,
    carried over by a resume from the target) or that started when the target's record says
    is the run the target holds. None when it may push, or when the target has no record."""
    ours = ours or {}
    if ours.get("last_push"):
        return None
    theirs = _record(read)
    if theirs is None or theirs.get("name") != name:
        return None  # no record, or another name's (held_elsewhere says that)
    if _ledger_names(read, name, ours):
        return None  # this run: an engine's new task or attempt, admitted by its gate
    started = theirs.get("started_at")
    if started == ours.get("started_at"):
        return None  # this run: its first push landed and was not yet recorded here
    epoch = theirs.get("epoch")
    said = printable(str(started))[:40] if isinstance(started, str) else "at an unknown time"
    got = f", epoch {epoch}" if isinstance(epoch, int) and not isinstance(epoch, bool) else ""
    return (
        f"{where} holds an earlier run also named {name!r} (started {said}{got}): this run's "
        "pushes would replace its weights at the head"
    )


EARLIER_FIX = (
    "`runspec submit --resume` goes on with that run; a new run pushes to another repo "
    "(push.hub.repo), or sets push.hub.reuse: true to write over it"
)


# An org member with one of these roles cannot push to the org's repos (huggingface/hub-docs,
# docs/hub/organizations-security.md: no_access, read, contributor, write, admin).
NO_PUSH_ROLES = frozenset({"no_access", "read"})


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def may_not_write(who: object, repo: str) -> str | None:
    """Why whoami-v2's answer says the token cannot write to `repo`; None when it may (or
    cannot tell: the first push is then the proof). The answer is the Hub's, read as
    untrusted: a field of the wrong shape tells nothing."""
    if not isinstance(who, dict) or not who:
        return None
    token = _dict(_dict(who.get("auth")).get("accessToken"))
    role = token.get("role")
    if role == "read":
        return f"the Hub token is read-only: it cannot push to {repo}"
    namespace = repo.split("/", 1)[0]
    orgs = {o.get("name"): o for o in map(_dict, _list(who.get("orgs")))}
    user = who.get("name")
    if namespace != user and namespace not in orgs:
        return f"the token's user {printable(str(user))!r} is not {namespace!r} nor one of its orgs"
    in_org = orgs.get(namespace) if namespace != user else None
    org_role = in_org.get("roleInOrg") if in_org is not None else None
    if org_role in NO_PUSH_ROLES:
        return (
            f"{printable(str(user))!r} is a member of {namespace!r} with the role {org_role!r}: "
            f"that role cannot push to {repo}"
        )
    if role == "fineGrained":
        for grant in map(_dict, _list(_dict(token.get("fineGrained")).get("scoped"))):
            entity = _dict(grant.get("entity"))
            if entity.get("name") in (namespace, repo) and "repo.write" in _list(
                grant.get("permissions")
            ):
                return None
        return f"the fine-grained token has no repo.write on {namespace}"
    return None


ROLE_FIX = (
    "give the daemon a write token for that namespace (an org admin gives members the write "
    "role under the org's Members settings)"
)
