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
import re
from collections.abc import Callable, Sequence
from typing import Any

from runspec.push.base import PushTarget, StagedFile, one_line
from runspec.push.card import model_card
from runspec.push.cardpush import push_card
from runspec.push.collect import Stager, is_checkpoint
from runspec.push.manifest import Manifest, ManifestEntry
from runspec.push.remote import RECORD
from runspec.spec.model import Spec
from runspec.store.atomic import write_text
from runspec.store.paths import RunPaths
from runspec.store.state import RunRecord
from runspec.voice import warning

_EPOCH_FILE = re.compile(r"^weights/epoch_(\d+)\.pt$")
# A first card is a few kilobytes: it gets what a final card gets when the budget is short.
FIRST_CARD_TIME_S = 60.0


def newest_checkpoint(entries: Sequence[ManifestEntry]) -> ManifestEntry | None:
    """The checkpoint to resume from among a manifest's files: last.pt (written first, every
    epoch), else the epoch_N.pt of the highest N. best.pt is an older epoch's weights."""
    by_path = {e.path: e for e in entries if is_checkpoint(e.path)}
    if "weights/last.pt" in by_path:
        return by_path["weights/last.pt"]
    numbered = [(int(m[1]), e) for p, e in by_path.items() if (m := _EPOCH_FILE.match(p))]
    return max(numbered, key=lambda pair: pair[0])[1] if numbered else None


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

    usd = record.cost.get("usd")
    cost = float(usd) if isinstance(usd, int | float) else None
    try:
        paths.report_dir.mkdir(parents=True, exist_ok=True)
        write_text(paths.model_card, model_card(spec, paths, record, cost, False, []))
    except OSError as exc:  # a full or read-only disk: the verified push it follows stands
        say(warning(f"no first model card: {one_line(exc)}; the final push brings one"))
        return False
    return push_card(target, paths, say, FIRST_CARD_TIME_S)
