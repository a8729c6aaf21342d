"""Accepting a spec: its job folder, its provenance, and the same-name rule.

A name is a run's identity and its folder. A spec whose name is taken is resumed only when it
is the same spec (same sha256) and its run is unfinished; otherwise it is refused, so an
earlier run's folder is never overwritten.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runspec.atomic import write_json_atomic
from runspec.clock import SYSTEM, Clock, utc_iso
from runspec.errors import RunspecError
from runspec.model import Spec
from runspec.paths import RunPaths
from runspec.state import RecordStore, RunRecord, RunStatus


class NameTaken(RunspecError):
    pass


def accept(
    spec: Spec,
    state_dir: Path,
    provenance: dict[str, Any] | None = None,
    clock: Clock = SYSTEM,
) -> RunRecord:
    """Queue a spec: returns its record, new or (same spec, unfinished) the existing one."""
    store = RecordStore(state_dir, clock)
    paths = RunPaths.for_spec(spec, state_dir)
    existing = store.load(spec.name)
    if existing is not None:
        if existing.spec_sha256 != spec.sha256:
            raise NameTaken(
                f"a run named {spec.name!r} already exists with another spec "
                f"(sha256 {existing.spec_sha256[:12]}, this one {spec.sha256[:12]}); "
                "give this run another name"
            )
        if existing.status is RunStatus.FINISHED:
            ended = existing.termination.value if existing.termination else "ended"
            raise NameTaken(
                f"run {spec.name!r} already finished ({ended}); "
                "give the new run another name to keep the old one's folder"
            )
        return existing
    if paths.run_dir.exists() and any(paths.run_dir.iterdir()):
        raise NameTaken(
            f"{paths.run_dir} already holds another run's files; "
            "give this run another name or move that folder away"
        )
    paths.job_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(paths.job_dir, 0o700)
    spec_file = paths.job_dir / "spec.yaml"
    spec_file.write_text(spec.text)
    received = utc_iso(clock.time())
    write_json_atomic(
        paths.job_dir / "provenance.json",
        {
            "name": spec.name,
            "sha256": spec.sha256,
            "source": spec.source,
            "received_at": received,
            **(provenance or {}),
        },
        mode=0o644,
    )
    record = RunRecord(name=spec.name, spec_sha256=spec.sha256, queued_at=received)
    store.save(record)
    return record
