"""The end's confirmation: `runspec/end.json` beside the receipt, added once the machine's end is
confirmed after the receipt was written. The receipt names the finish about to be applied and
where its confirmation goes (`finish.confirmation`); this file says the end happened.

Two can see it: the box, when the provider it asked reports the instance going or gone while
the box still runs (a stop or a destroy through the provider's API; pushed within END_PUSH_S,
as the machine is going), and `runspec watch`, when it ended the box and its poll saw the
instance go (runspec.watch.endedby). No file means nobody saw the end: the run's record or the
lease's `ended_by` then says how far it got. Like the receipt it never holds a secret, a user
or a host name: the action, the provider, the instance id and the state the provider reported.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from runspec.clock import utc_iso
from runspec.printable import printable
from runspec.push.cardpush import push_one
from runspec.push.manifest import Manifest, digest_file
from runspec.push.remote import END
from runspec.push.targets import make_target
from runspec.spec.model import Spec
from runspec.store.atomic import write_text
from runspec.store.finishrecord import FinishRecord
from runspec.store.paths import RunPaths
from runspec.voice import warning

END_SCHEMA = 1
END_PUSH_S = 30.0  # the longest the box spends pushing it: its machine is going
MAX_TEXT = 300


def end_doc(run: str, by: str, action: str, outcome: dict[str, Any], at: float) -> dict[str, Any]:
    """The confirmation of `action` on the instance `outcome` names (provider, instance, the
    state it reported, a detail), seen by `by` (box or watch) at `at`."""

    def text(key: str) -> str | None:
        value = outcome.get(key)
        return None if value is None else printable(str(value))[:MAX_TEXT]

    return {
        "schema": END_SCHEMA,
        "run": run,
        "confirmed": True,
        "by": by,
        "action": action,
        "provider": text("provider"),
        "instance": text("instance"),
        "state": text("state"),
        "detail": text("detail"),
        "at": utc_iso(at),
    }


def box_confirmation(run: str, record: FinishRecord | None, now: float) -> dict[str, Any] | None:
    """The box's own finish, confirmed by its provider (None: nothing was confirmed: no end
    asked of a provider, a dry run, an end the provider did not confirm)."""
    result = record.result if record is not None else None
    if (
        result is None
        or result.dry_run
        or not result.ok
        or result.action not in ("stop", "destroy")
    ):
        return None
    outcome = result.provider if isinstance(result.provider, dict) else {}
    if outcome.get("confirmed") is not True:
        return None
    return end_doc(run, "box", result.action, outcome, now)


def send_end(
    spec: Spec, paths: RunPaths, finish: FinishRecord | None, say: Callable[[str], None], now: float
) -> bool:
    """After the box's own finish: its confirmation, pushed beside the receipt of a run whose
    final push verified; a failure is said and returned, never raised."""
    pushed = Manifest.load(paths.pushed_manifest)
    doc = box_confirmation(spec.name, finish, now)
    if spec.push is None or pushed is None or not pushed.final or doc is None:
        return False
    local = paths.end_file
    write_text(local, json.dumps(doc, indent=2) + "\n")
    target = make_target(spec, paths)
    found: list[list[str]] = []

    def push() -> None:
        found.append(
            push_one(target, local, END, digest_file(local), "runspec: the end, confirmed")
        )

    # Bounded: the client takes no total time, and a machine going away may never answer.
    worker = threading.Thread(target=push, name="end-push", daemon=True)
    worker.start()
    worker.join(END_PUSH_S)
    problems = found[0] if found else [f"not done within {END_PUSH_S:g}s"]
    if problems:
        say(warning(f"the end's confirmation was NOT pushed ({problems[0]})"))
        return False
    say(f"the end's confirmation pushed to {target.description} ({END})")
    return True
