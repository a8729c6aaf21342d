"""The model card goes out after the final weights are verified, in a commit of its own.

A card rode in the final weights' commit once, so a card the Hub refused (its metadata check
answers 400 for front matter it does not accept) failed the whole final push and left the
weights on the machine's disk alone. Now a refused card is said, with the Hub's reason, and the
verified weights stand. A run that made no weights pushes nothing at all: no new repo, no card
offering weights that do not exist.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from runspec.push.base import PushFailed, PushTarget, StagedFile, one_line
from runspec.push.collect import CARD
from runspec.push.manifest import Digest, ManifestEntry, digest_file
from runspec.store.paths import RunPaths
from runspec.voice import warning


def made_weights(paths: RunPaths) -> bool:
    """Whether training left any weights file in the run folder."""
    return any(p.is_file() for p in (paths.run_dir / "weights").glob("*.pt"))


# A card is a few kilobytes: one commit and one read of its record. With less time than this
# before the deadline plus its overrun (the end's own grace), the finish must not wait for it.
CARD_TIME_S = 5.0


def push_card(
    target: PushTarget,
    paths: RunPaths,
    say: Callable[[str], None],
    time_left: float,
    card: Path | None = None,
) -> bool:
    """Push and verify the card (the final one unless `card` names another file) as the
    target's README.md; a failure is said and returned, never raised."""
    if time_left < CARD_TIME_S:
        say(
            warning(
                f"no model card: {max(time_left, 0):.0f} s left of the budget's overrun, and "
                "the finish goes first; the weights are pushed and verified without it"
            )
        )
        return False
    card = card or paths.model_card
    try:
        digest = digest_file(card)
    except OSError as exc:
        say(warning(f"no model card to push: {one_line(exc)}"))
        return False
    problems = push_one(target, card, CARD, digest, "runspec: model card")
    if problems:
        say(
            warning(
                f"the model card was NOT pushed ({problems[0]}); the weights are pushed and "
                "verified without it"
            )
        )
        return False
    say(f"model card pushed to {target.description}")
    return True


def push_one(target: PushTarget, local: Path, path: str, digest: Digest, message: str) -> list[str]:
    """One small file of runspec's own (the card, the receipt) in a commit of its own, verified
    as any push is; the problems found ([] when it landed and verified), never raised."""
    entry = ManifestEntry(
        path=path,
        size=digest.size,
        sha256=digest.sha256,
        epoch=None,
        time="",
        blob_id=digest.blob_id,
    )
    staged = StagedFile(entry, local)
    try:
        commit = target.push([staged], message)
        return target.verify(commit, [entry], [staged])
    except PushFailed as exc:
        return [str(exc)]
