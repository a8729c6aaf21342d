"""Accepting a spec: its job folder, where its files will go, its provenance, and the same-name
rule.

A name is a run's identity and its folder. A spec whose name is taken is resumed only when it
is the same spec (same sha256) and its run is unfinished; otherwise it is refused, so an
earlier run's folder is never overwritten. Where the run folder and the data go is decided here,
once (`paths.json`): the spec's own choice, else the daemon config's `runs:`/`data:`, so the
folder the guard checks is the folder the run trains in.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runspec.clock import SYSTEM, Clock, utc_iso
from runspec.errors import UsageError
from runspec.spec.model import Spec
from runspec.spec.rules import RULES_VERSION
from runspec.store.atomic import write_json_atomic, write_text
from runspec.store.hint import command
from runspec.store.paths import RunPaths
from runspec.store.room import reserve_note
from runspec.store.state import DamagedRecord, RecordStore, RunRecord, RunStatus


class NameTaken(UsageError):
    """A refusal of the command line (exit 2): the name belongs to another run."""


def check_name(
    spec: Spec, state_dir: Path, *, runs: Path | None = None, data: Path | None = None
) -> RunRecord | None:
    """The run to resume under this name (same spec, unfinished), None for a new run; raises
    NameTaken, saying how to go on, when the name belongs to another run. `runspec submit`
    asks this before the spec ever reaches the inbox."""
    store = RecordStore(state_dir.absolute())
    rm = command(f"rm {spec.name}", state_dir)  # the hint, pasteable as printed
    try:
        existing = store.load(spec.name)
    except DamagedRecord as exc:
        raise NameTaken(
            f"a run named {spec.name!r} exists but its record is damaged ({exc.reason}); "
            f"give this run another name, or `{rm}` the old one"
        ) from exc
    if existing is not None:
        if existing.spec_sha256 != spec.sha256:
            raise NameTaken(
                f"a run named {spec.name!r} already exists with another spec "
                f"(sha256 {existing.spec_sha256[:12]}, this one {spec.sha256[:12]}); "
                f"give this run another name, or `{rm}` the old one"
            )
        if existing.status is RunStatus.FINISHED:
            ended = existing.termination.value if existing.termination else "ended"
            raise NameTaken(
                f"run {spec.name!r} already finished ({ended}); give the new run another "
                f"name, or `{rm}` the old one (its weights stay)"
            )
        return existing
    if store.damaged(spec.name) is not None:
        raise NameTaken(
            f"run {spec.name!r} was set aside as damaged; give this run another name, or "
            f"`{rm}` the old one"
        )
    run_dir = RunPaths.decide(spec, state_dir, runs=runs, data=data).run_dir
    if run_dir.exists() and any(run_dir.iterdir()):
        raise NameTaken(
            f"{run_dir} already holds another run's files; "
            "give this run another name or move that folder away"
        )
    return None


def accept(
    spec: Spec,
    state_dir: Path,
    provenance: dict[str, Any] | None = None,
    clock: Clock = SYSTEM,
    *,
    runs: Path | None = None,
    data: Path | None = None,
) -> RunRecord:
    """Queue a spec: returns its record, new or (same spec, unfinished) the existing one."""
    state_dir = state_dir.absolute()
    existing = check_name(spec, state_dir, runs=runs, data=data)
    if existing is not None:
        return existing
    store = RecordStore(state_dir, clock)
    paths = RunPaths.decide(spec, state_dir, runs=runs, data=data)
    paths.job_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(paths.job_dir, 0o700)
    paths.save()
    reserve_note(paths.disk_note)
    # Whole or not at all: the daemon's views and a restart read it while a run is accepted.
    write_text(paths.spec_file, spec.text, 0o600)
    received = utc_iso(clock.time())
    write_json_atomic(
        paths.provenance_file,
        {
            "name": spec.name,
            "sha256": spec.sha256,
            "source": spec.source,
            "received_at": received,
            **(provenance or {}),
        },
        mode=0o644,
    )
    record = RunRecord(
        name=spec.name, spec_sha256=spec.sha256, queued_at=received, spec_rules=RULES_VERSION
    )
    store.save(record)
    return record
