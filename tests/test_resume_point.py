"""Which pushed checkpoint a fresh machine resumes from (runspec.push.hubrecord)."""

from __future__ import annotations

import pytest

from runspec.push.hubrecord import newest_checkpoint
from runspec.push.manifest import ManifestEntry


def _entries(**epochs: int) -> list[ManifestEntry]:
    """weights/NAME.pt entries of these epochs, beside a run file."""
    return [
        ManifestEntry(f"weights/{name}.pt", 1, name * 2, epoch, "t")
        for name, epoch in epochs.items()
    ] + [ManifestEntry("metrics.jsonl", 1, "m", 9, "t")]


@pytest.mark.parametrize(
    ("pushed", "resumed_from"),
    [
        ({"last": 3, "best": 2, "epoch_3": 3}, "last"),  # the usual push: last.pt
        # A push that met LibreYOLO rewriting last.pt carries the copy of the epoch before.
        ({"last": 1, "best": 2, "epoch_2": 2}, "epoch_2"),
        ({"last": 1, "best": 2}, "best"),
        ({"best": 1}, "best"),  # no last.pt staged yet: best.pt still resumes the run
        ({"epoch_2": 2, "epoch_4": 4, "best": 3}, "epoch_4"),
        ({"average": 5}, None),  # not a checkpoint LibreYOLO resumes from
        ({}, None),
    ],
)
def test_the_checkpoint_of_the_newest_epoch_is_the_one_resumed(
    pushed: dict[str, int], resumed_from: str | None
) -> None:
    found = newest_checkpoint(_entries(**pushed))
    assert (found.path if found else None) == (
        f"weights/{resumed_from}.pt" if resumed_from else None
    )
