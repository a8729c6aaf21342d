"""The run's record at its push target (`runspec/record.json`), sent with every push.

A run spans machines: a fresh machine (a new disk, a task an engine recovered) reads the record
and manifest at the target to learn when the budget started, which checkpoint is the newest one
verified there, how far the run got and whether it failed for good (`terminal`). `runspec status
--hub` reads the same record from a laptop. So it rides in every commit, scheduled and final,
beside the manifest that lists the files of that commit (it is, like the manifest, not listed in
itself), and the first verified push also gives the repo a first model card, whose `runspec` tag
makes a live run findable.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from runspec.push.base import PushTarget, StagedFile, one_line
from runspec.push.card import model_card
from runspec.push.cardpush import push_card
from runspec.push.collect import Stager
from runspec.push.manifest import Manifest, ManifestEntry
from runspec.push.remote import RECORD
from runspec.spec.model import Spec
from runspec.store.atomic import write_text
from runspec.store.paths import RunPaths
from runspec.store.state import RunRecord
from runspec.trainer.checkpoints import epoch_number
from runspec.voice import warning

# The resumable checkpoints besides weights/epoch_N.pt (1), ranked for a tie in epochs.
_PREFERRED = {"weights/last.pt": 2, "weights/best.pt": 0}
# A first card is a few kilobytes: it gets what a final card gets when the budget is short.
FIRST_CARD_TIME_S = 60.0


def newest_checkpoint(entries: Sequence[ManifestEntry]) -> ManifestEntry | None:
    """The checkpoint to resume from among a manifest's files: the one of the newest epoch.

    last.pt is written first every epoch, so it usually is that one. But a push that found
    LibreYOLO rewriting last.pt leaves it for the next push and carries the copy it staged
    before, and then an epoch_N.pt or best.pt of a later epoch beside it is the newer
    checkpoint: resuming from the older one would train an epoch again, and a push with no
    last.pt at all would leave nothing to resume from. On a tie: last.pt, then epoch_N.pt,
    then best.pt."""
    found = [e for e in entries if e.path in _PREFERRED or _is_epoch_file(e.path)]
    if not found:
        return None
    return max(found, key=lambda e: (e.epoch or 0, _PREFERRED.get(e.path, 1)))


def _is_epoch_file(path: str) -> bool:
    folder, _, name = path.rpartition("/")
    return folder == "weights" and epoch_number(name) is not None


def budget_start(record: RunRecord) -> str | None:
    """When the run's budget started: a resume with a new budget moved it (UTC)."""
    return record.budget_started_at or record.started_at


def record_json(record: RunRecord, manifest: Manifest) -> dict[str, Any]:
    """The record as the target keeps it, with what this push holds."""
    newest = newest_checkpoint(manifest.entries)
    return {
        **record.to_json(),
        "budget_started_at": budget_start(record),
        "checkpoint": None
        if newest is None
        else {"path": newest.path, "epoch": newest.epoch, "sha256": newest.sha256},
        "push": {"epoch": manifest.epoch, "time": manifest.time, "final": manifest.final},
    }


def stage_record(stager: Stager, record: RunRecord, manifest: Manifest) -> StagedFile:
    text = json.dumps(record_json(record, manifest), indent=2, sort_keys=True) + "\n"
    return stager.add_text(RECORD, text)


def push_first_card(
    spec: Spec, paths: RunPaths, record: RunRecord, target: PushTarget, say: Callable[[str], None]
) -> bool:
    """After the run's first verified push: a card (the `runspec` tag) in a commit of its own.
    The final card replaces it; a refused one is said and holds nothing back."""

    cost = record.cost.usd if record.cost else None
    try:
        paths.report_dir.mkdir(parents=True, exist_ok=True)
        write_text(paths.first_card, model_card(spec, paths, record, cost, False, []))
    except OSError as exc:  # a full or read-only disk: the verified push it follows stands
        say(warning(f"no first model card: {one_line(exc)}; the final push brings one"))
        return False
    return push_card(target, paths, say, FIRST_CARD_TIME_S, paths.first_card)
