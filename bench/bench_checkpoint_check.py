"""The checkpoint check (runspec.trainer.checkpoints.is_intact) against the stdlib's
`ZipFile.testzip`, which it replaced for torch's stored members; prints figures, asserts nothing.

Every push, resume and machine end reads each checkpoint in full through this check. A torch
checkpoint is a zip with one stored member per tensor: yolo9-t's last.pt holds 4,445 of them in
35 MB. The archives here are that shape (random tensors, torch.save), at yolo9-t's size and a
larger model's; `--file` times a real checkpoint as well. Medians of --runs, the file in the page
cache (the check's own cost, not the disk's), with the baseline measured in the same run.

    .venv/bin/python bench/bench_checkpoint_check.py [--runs 7] [--file weights/last.pt]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runspec.trainer.checkpoints import is_intact  # noqa: E402

MEMBERS = 4445  # yolo9-t's last.pt: model, EMA and optimizer tensors


def checkpoint_shaped(path: Path, mb: int, members: int = MEMBERS) -> None:
    import torch  # only to write the archive, as LibreYOLO does

    per = max(1, mb * 1_000_000 // 4 // members)  # float32 elements per tensor
    torch.save({f"t{i}": torch.randn(per) for i in range(members)}, path)


def testzip(path: Path) -> bool:
    with zipfile.ZipFile(path) as archive:
        return archive.testzip() is None


def median_s(check: Callable[[Path], bool], path: Path, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        if not check(path):
            raise SystemExit(f"{path}: judged damaged")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def compare(label: str, path: Path, runs: int) -> None:
    testzip(path)  # into the page cache
    old = median_s(testzip, path, runs)
    new = median_s(is_intact, path, runs)
    mb = path.stat().st_size / 1e6
    print(
        f"{label:<28} {mb:7.1f} MB  testzip {old * 1000:7.1f} ms  is_intact {new * 1000:7.1f} ms"
        f"  ({old / new:.1f}x, {mb / new:.0f} MB/s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--file", type=Path, action="append", default=[], help="a real .pt")
    args = parser.parse_args()
    print(f"medians of {args.runs} runs")
    with tempfile.TemporaryDirectory() as tmp:
        for label, mb in (("yolo9-t-sized (35 MB)", 35), ("a larger model (300 MB)", 300)):
            path = Path(tmp) / f"{mb}.pt"
            checkpoint_shaped(path, mb)
            compare(label, path, args.runs)
            path.unlink()
    for path in args.file:
        compare(path.name, path, args.runs)


if __name__ == "__main__":
    main()
