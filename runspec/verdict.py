"""What a run's end proves: whether its weights are off the machine, whether the machine's may
end, and the exit status `runspec run` reports."""

from __future__ import annotations

from collections.abc import Callable

from runspec.errors import EXIT_FAILED, EXIT_OK, EXIT_UNVERIFIED
from runspec.model import Spec
from runspec.state import RecordStore, RunRecord, RunStatus, Termination

SUCCESSFUL = frozenset({Termination.COMPLETED, Termination.BUDGET})


def final_push_verified(spec: Spec, record: RunRecord) -> bool:
    if spec.push is None:
        return True  # nothing was to leave the machine; no finish ends it with weights aboard
    return record.last_push is not None and record.last_push.final


def machine_weights_safe(store: RecordStore, load: Callable[[str], Spec]) -> tuple[bool, str]:
    """Before a finish that acts for the whole machine (a deferred or an idle finish): every
    run that trained here has its final push verified elsewhere. A run with no push section
    that trained keeps its weights only on this disk, so it makes the machine unsafe too."""
    for record in store.all():
        if record.status is RunStatus.QUEUED or record.run_dir is None:
            continue  # never trained: no weights of its own on this disk
        if record.status is not RunStatus.FINISHED:
            return False, f"run {record.name} is still {record.status.value}"
        spec = load(record.name)
        if spec.push is None:
            return False, f"run {record.name} pushes nowhere: its weights are only on this disk"
        if not final_push_verified(spec, record):
            return False, f"run {record.name}'s final push was not verified"
    return True, "every run's final push is verified"


def exit_code(spec: Spec, record: RunRecord) -> int:
    """`runspec run`'s exit status (DESIGN.md)."""
    if record.termination not in SUCCESSFUL:
        return EXIT_FAILED
    if not final_push_verified(spec, record):
        return EXIT_UNVERIFIED
    return EXIT_OK
