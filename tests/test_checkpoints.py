"""Checkpoint completeness: the epoch marker plus the zip check, on real torch checkpoints."""

from __future__ import annotations

import json
import os
import time
import zipfile
from pathlib import Path

import torch

from runspec.push.hubrecord import newest_checkpoint
from runspec.push.manifest import ManifestEntry
from runspec.trainer import control
from runspec.trainer.checkpoints import (
    complete_checkpoints,
    is_intact,
    newest_intact_checkpoint,
    stage_copy,
)
from runspec.trainer.control import EpochMarker, FileStat


def _save_checkpoint(path: Path, epoch: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"epoch": epoch, "weights": torch.arange(50_000, dtype=torch.float32)}, path)


def _mark(run_dir: Path, control_dir: Path, epoch: int, names: list[str]) -> None:
    files = {f"weights/{n}": FileStat.of(run_dir / "weights" / n) for n in names}
    control.write_epoch_marker(
        control_dir,
        EpochMarker(epoch, 10, 1.0, True, time.time(), files),
    )


def _truncate(path: Path) -> None:
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.truncate(size // 2)


def test_is_intact_accepts_a_torch_checkpoint_and_refuses_a_cut_one(tmp_path: Path) -> None:
    ckpt = tmp_path / "last.pt"
    _save_checkpoint(ckpt, 1)
    assert is_intact(ckpt)
    _truncate(ckpt)
    assert not is_intact(ckpt)
    assert not is_intact(tmp_path / "missing.pt")
    (tmp_path / "text.pt").write_text("not a checkpoint")
    assert not is_intact(tmp_path / "text.pt")


def test_is_intact_refuses_a_flipped_byte(tmp_path: Path) -> None:
    ckpt = tmp_path / "last.pt"
    _save_checkpoint(ckpt, 1)
    data = bytearray(ckpt.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the tensor payload: only the CRC notices
    ckpt.write_bytes(bytes(data))
    assert not is_intact(ckpt)


def _stdlib_verdict(path: Path) -> bool:
    """What is_intact answered before it read stored members itself: the stdlib's testzip."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            return any(n.endswith("data.pkl") for n in names) and archive.testzip() is None
    except Exception:  # what the stdlib raises on a damaged archive varies
        return False


def test_is_intact_judges_every_damaged_copy_as_the_stdlibs_testzip_does(tmp_path: Path) -> None:
    ckpt = tmp_path / "last.pt"
    # Many members, as torch writes a real model: one per tensor, each behind its own header.
    torch.save({f"layer{i}": torch.full((i + 1, 7), float(i)) for i in range(60)}, ckpt)
    good = ckpt.read_bytes()
    with zipfile.ZipFile(ckpt) as archive:
        directory = archive.start_dir
    assert is_intact(ckpt) and _stdlib_verdict(ckpt)
    # A flipped byte at a spread of places (headers, names, payloads, the central directory)
    # and at every byte of the first local header and of the end: never whole where the stdlib
    # refuses, and the same verdict wherever members lie. In the central directory it may be
    # stricter: a stored member whose two recorded sizes differ is refused.
    positions = {*range(0, len(good), 97), *range(0, 120), *range(len(good) - 400, len(good))}
    seen = {True: 0, False: 0}
    for pos in sorted(positions):
        damaged = bytearray(good)
        damaged[pos] ^= 0x5A
        ckpt.write_bytes(bytes(damaged))
        verdict, ours = _stdlib_verdict(ckpt), is_intact(ckpt)
        where = f"byte {pos} of {len(good)} (directory at {directory})"
        assert verdict or not ours, f"{where}: whole to us, damaged to the stdlib"
        if pos < directory:
            assert ours == verdict, f"{where}: the stdlib says {verdict}"
        seen[verdict] += 1
    for cut in range(0, len(good), len(good) // 40):
        ckpt.write_bytes(good[:cut])
        assert not is_intact(ckpt), f"cut at {cut} of {len(good)}"
    assert seen[False] > 50 and seen[True] > 10, seen  # both verdicts were exercised


def test_is_intact_reads_a_compressed_archive_with_the_stdlibs_check(tmp_path: Path) -> None:
    ckpt = tmp_path / "deflated.pt"
    with zipfile.ZipFile(ckpt, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data.pkl", b"x" * 10_000)
    assert is_intact(ckpt)
    data = bytearray(ckpt.read_bytes())
    data[60] ^= 0xFF  # inside the compressed payload
    ckpt.write_bytes(bytes(data))
    assert not is_intact(ckpt)


def test_complete_checkpoints_follow_the_marker(tmp_path: Path) -> None:
    run, ctl = tmp_path / "run", tmp_path / "control"
    assert complete_checkpoints(run, ctl) == []  # no marker yet: nothing is complete
    _save_checkpoint(run / "weights" / "last.pt", 2)
    _save_checkpoint(run / "weights" / "epoch_2.pt", 2)
    _mark(run, ctl, 2, ["last.pt", "epoch_2.pt"])
    found = {c.relpath: c.epoch for c in complete_checkpoints(run, ctl)}
    assert found == {"weights/last.pt": 2, "weights/epoch_2.pt": 2}

    # The trainer starts rewriting last.pt for epoch 3: no longer vouched for.
    time.sleep(0.01)
    _save_checkpoint(run / "weights" / "last.pt", 3)
    still = {c.relpath for c in complete_checkpoints(run, ctl)}
    assert still == {"weights/epoch_2.pt"}


def test_a_cut_file_with_the_recorded_stats_is_not_complete(tmp_path: Path) -> None:
    run, ctl = tmp_path / "run", tmp_path / "control"
    _save_checkpoint(run / "weights" / "last.pt", 1)
    _truncate(run / "weights" / "last.pt")
    _mark(run, ctl, 1, ["last.pt"])  # even a marker that matches cannot vouch for a broken file
    assert complete_checkpoints(run, ctl) == []


def test_stage_copy_copies_complete_files_and_refuses_changed_ones(tmp_path: Path) -> None:
    run, ctl, staged = tmp_path / "run", tmp_path / "control", tmp_path / "staged"
    _save_checkpoint(run / "weights" / "last.pt", 1)
    _mark(run, ctl, 1, ["last.pt"])
    [item] = complete_checkpoints(run, ctl)
    copy = stage_copy(run, item, staged)
    assert copy == staged / "weights" / "last.pt"
    assert copy.read_bytes() == (run / "weights" / "last.pt").read_bytes()

    time.sleep(0.01)
    _save_checkpoint(run / "weights" / "last.pt", 2)  # changed after the listing
    assert stage_copy(run, item, tmp_path / "staged2") is None
    leftovers = list((tmp_path / "staged2").rglob("*"))
    assert all(p.is_dir() for p in leftovers)


def test_newest_intact_checkpoint_skips_broken_files(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert newest_intact_checkpoint(run) is None
    for n in (2, 4, 10):
        _save_checkpoint(run / "weights" / f"epoch_{n}.pt", n)
    _save_checkpoint(run / "weights" / "last.pt", 11)
    assert newest_intact_checkpoint(run) == run / "weights" / "last.pt"
    _truncate(run / "weights" / "last.pt")
    assert newest_intact_checkpoint(run) == run / "weights" / "epoch_10.pt"  # 10 > 4 > 2
    _truncate(run / "weights" / "epoch_10.pt")
    assert newest_intact_checkpoint(run) == run / "weights" / "epoch_4.pt"
    os.remove(run / "weights" / "epoch_4.pt")
    assert newest_intact_checkpoint(run) == run / "weights" / "epoch_2.pt"


def test_control_files_round_trip(tmp_path: Path) -> None:
    ctl = tmp_path / "control"
    assert control.stop_requested(ctl) is None
    control.request_stop(ctl, "cancelled by user")
    control.request_stop(ctl, "budget")  # the first reason wins
    assert control.stop_requested(ctl) == "cancelled by user"
    assert control.read_deadline(ctl) is None
    control.write_deadline(ctl, 1_800_000_000.5)
    assert control.read_deadline(ctl) == 1_800_000_000.5
    assert "2027-01-15T08:00:00+00:00" in (ctl / "deadline").read_text()
    control.clear_for_launch(ctl)
    assert control.stop_requested(ctl) is None
    assert control.read_deadline(ctl) == 1_800_000_000.5  # the deadline belongs to the run


def test_a_best_pt_left_from_an_older_epoch_keeps_that_epoch(tmp_path: Path) -> None:
    """LibreYOLO rewrites best.pt only when the metric improves: a best.pt of epoch 1 that a
    marker of epoch 3 still vouches for holds epoch 1, and must say so. Labelled 3, it was the
    newest checkpoint where last.pt was left out of a push (being rewritten), and a retry
    resumed from it and trained epochs 2 and 3 again."""
    run, ctl = tmp_path / "run", tmp_path / "control"
    weights = run / "weights"
    _save_checkpoint(weights / "last.pt", 1)
    _save_checkpoint(weights / "best.pt", 1)
    _mark(run, ctl, 1, ["last.pt", "best.pt"])
    for epoch in (2, 3):  # no better metric: last.pt only
        time.sleep(0.01)
        _save_checkpoint(weights / "last.pt", epoch)
        _mark(run, ctl, epoch, ["last.pt", "best.pt"])
    found = {c.relpath: c.epoch for c in complete_checkpoints(run, ctl)}
    assert found == {"weights/last.pt": 3, "weights/best.pt": 1}
    # The next epoch rewrites last.pt: the push that skips it must not resume from epoch 1 as 3.
    time.sleep(0.01)
    _save_checkpoint(weights / "last.pt", 4)
    entries = [
        ManifestEntry(c.relpath, c.size, "0" * 64, c.epoch, "2027-01-15T08:00:00Z")
        for c in complete_checkpoints(run, ctl)
    ]
    newest = newest_checkpoint(entries)
    assert newest is not None and (newest.path, newest.epoch) == ("weights/best.pt", 1)
    # An improved metric rewrites best.pt: from then on it is that epoch's.
    time.sleep(0.01)
    _save_checkpoint(weights / "best.pt", 4)
    _mark(run, ctl, 4, ["last.pt", "best.pt"])
    found = {c.relpath: c.epoch for c in complete_checkpoints(run, ctl)}
    assert found == {"weights/last.pt": 4, "weights/best.pt": 4}
    # A marker written before per-file epochs (no file_epochs) reads as before.
    data = json.loads((ctl / control.EPOCH_MARKER_FILE).read_text())
    data.pop("file_epochs", None)
    (ctl / control.EPOCH_MARKER_FILE).write_text(json.dumps(data))
    assert {c.epoch for c in complete_checkpoints(run, ctl)} == {4}
