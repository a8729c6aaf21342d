"""The lease names the newest checkpoint on the box and in the last verified push: with
`save_period: 10` at epoch 15, that is last.pt, never the five-epoch-older epoch_10.pt."""

from __future__ import annotations

import os
from pathlib import Path

from runspec.watch.renew import newest_on_disk, newest_pushed


def test_the_newest_on_disk_is_the_checkpoint_written_last(tmp_path: Path) -> None:
    weights = tmp_path / "weights"
    weights.mkdir()
    for age, name in ((30, "epoch_10.pt"), (20, "best.pt"), (0, "last.pt"), (40, "epoch_5.pt")):
        (weights / name).write_bytes(b"w")
        os.utime(weights / name, (1_000_000 - age, 1_000_000 - age))
    assert newest_on_disk(weights) == "last.pt"
    os.utime(weights / "best.pt", (2_000_000, 2_000_000))  # a new best, written after last.pt
    assert newest_on_disk(weights) == "best.pt"
    assert newest_on_disk(tmp_path / "none") is None


def test_the_newest_pushed_is_last_pt_then_the_highest_epoch_then_best() -> None:
    files = ["weights/best.pt", "weights/epoch_10.pt", "weights/last.pt", "README.md"]
    assert newest_pushed(files) == "last.pt"
    assert newest_pushed(["weights/epoch_2.pt", "weights/epoch_10.pt", "weights/best.pt"]) == (
        "epoch_10.pt"
    )
    assert newest_pushed(["weights/best.pt", "results.csv"]) == "best.pt"
    assert newest_pushed(["README.md"]) is None


def test_a_pushed_name_that_only_looks_numbered_is_no_epoch_and_breaks_nothing() -> None:
    # The trainer runs code nobody here wrote and names its files itself: a superscript or a
    # circled digit passes str.isdigit() but not int(), and a lease renewal must not die of it.
    for odd in ("epoch_².pt", "epoch_①.pt", "epoch_٣.pt", "epoch_.pt", "epoch_-1.pt"):
        assert newest_pushed([f"weights/{odd}", "weights/best.pt"]) == "best.pt", odd
    assert newest_pushed(["weights/epoch_².pt", "weights/epoch_7.pt"]) == "epoch_7.pt"
