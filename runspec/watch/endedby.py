"""One finish, whoever decides it: a box that a watcher ended applies no finish of its own.

The watcher writes `ended_by` into the lease before it calls the provider. A box that comes
back (its Hub reachable again, its processes thawed) still pushes what it can, but its finish
reads the lease first: when a watcher ended it, the run records that and stops, and no
provider call of its own follows the watcher's (two ends of one instance, a destroy after a
stop that kept the disk on purpose).

A watcher that saw the instance go adds its confirmation beside the run's receipt
(`runspec/end.json`, runspec.push.endconfirm), as the box does for an end it sees confirmed.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from runspec.clock import Clock, utc_iso
from runspec.hubread import MAX_BYTES
from runspec.push.base import one_line
from runspec.push.endconfirm import end_doc
from runspec.push.quota import hub_commit
from runspec.push.remote import END
from runspec.spec.model import Spec
from runspec.store.finishrecord import EndAction, FinishRecord, FinishResult
from runspec.store.owner import RunOwner
from runspec.store.paths import RunPaths
from runspec.store.state import RunStatus
from runspec.voice import warning
from runspec.watch.lease import HubLease, Lease

log = logging.getLogger("runspec.watch")

HUB_READ_S = 30.0  # the longest the finish waits for the lease at the Hub


def _local(paths: RunPaths) -> dict[str, Any] | None:
    """`ended_by` in the lease's copy beside the record (what the last renewal read)."""
    try:
        with open(paths.lease_file, "rb") as fh:
            data = json.loads(fh.read(MAX_BYTES + 1)[:MAX_BYTES])
    except (OSError, ValueError):
        return None
    ended = data.get("ended_by") if isinstance(data, dict) else None
    return ended if isinstance(ended, dict) else None


def ended_by_watcher(spec: Spec, paths: RunPaths) -> dict[str, Any] | None:
    """A watcher's end of this box: from the lease's copy, else from one read of the lease at
    the Hub (an unreadable Hub: none known)."""
    if spec.watch.lease is None or spec.push is None or spec.push.hub is None:
        return None
    if (ended := _local(paths)) is not None:
        return ended
    repo, found = spec.push.hub.repo, []

    def read() -> None:
        try:
            found.append(HubLease(repo).read()[1])
        except Exception as exc:  # any fault: no end known, the box's own finish goes on
            log.info("%s: the lease could not be read before the finish: %s", spec.name, exc)

    # Bounded: huggingface_hub's client has no timeout of its own, and a hung Hub must not
    # hold the finish (and the machine's billing) for ever.
    reader = threading.Thread(target=read, name="lease-read", daemon=True)
    reader.start()
    reader.join(HUB_READ_S)
    lease = found[0] if found else None
    # Only a watcher holding the watch key ends a box (a proven lease, runspec.watch.seal).
    if lease is None or lease.run != spec.name or lease.ended_by is None or not lease.proven:
        return None
    return lease.ended_by


def finish_as_ended(
    spec: Spec, owner: RunOwner, ended: dict[str, Any], clock: Clock, say: Callable[[str], None]
) -> None:
    """Record that a watcher ended this box, and end the run without a finish of its own."""
    by, action, at = ended.get("by"), ended.get("action"), ended.get("at")
    summary = f"ended by {by} ({action} at {at}): no finish of this box's own"
    say(warning(f"finish: not applied: this box was {summary}; runspec calls no provider"))
    result = FinishResult(
        requested=spec.finish.action.value,
        action=EndAction.NONE,
        verified=bool(owner.record.last_push and owner.record.last_push.final),
        dry_run=False,
        ok=True,
        plan=f"leave the end to {by}",
        summary=summary,
        detail=json.dumps(ended, sort_keys=True)[:2000],
        started_at=utc_iso(clock.time()),
    )
    owner.finish_noted(FinishRecord.applied(result))
    owner.transition(RunStatus.FINISHED, f"finish: {summary}")


def ended_by_watch(
    spec: Spec, paths: RunPaths, owner: RunOwner, clock: Clock, say: Callable[[str], None]
) -> bool:
    """Whether a watcher ended this box; when it did, the run is recorded ended by it (and
    the box applies no finish of its own)."""
    ended = ended_by_watcher(spec, paths)
    if ended is not None:
        finish_as_ended(spec, owner, ended, clock, say)
    return ended is not None


def confirm_end(hub: HubLease, lease: Lease, action: str, detail: str, at: float) -> bool:
    """The end a watcher saw confirmed, added beside the run's receipt in a commit of its own;
    a failure is logged and returned (the end stands, and the lease's `ended_by` names it)."""
    outcome = {"provider": lease.provider, "instance": lease.instance, "detail": detail}
    doc = end_doc(lease.run, "watch", action, outcome, at)
    body = json.dumps(doc, indent=2).encode() + b"\n"
    try:
        hub_commit(
            hub.repo,
            lambda: hub.api.upload_file(
                path_or_fileobj=body,
                path_in_repo=END,
                repo_id=hub.repo,
                repo_type="model",
                commit_message=f"runspec watch: the {action} confirmed",
            ),
        )
    except Exception as exc:  # any fault: said, and the end stands
        log.warning("%s: the end's confirmation was not added: %s", hub.repo, one_line(exc))
        return False
    return True
