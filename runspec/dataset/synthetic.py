"""A tiny generated YOLO dataset: a coloured rectangle on noise per image, labels that match.

Deterministic for a seed, so a demo, a test or a new machine's smoke test always trains on the
same bytes. Heavy-ish (numpy, PIL): the daemon runs it as `python -m runspec.dataset.synthetic`
rather than importing it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from runspec.spec.model import SyntheticDataset

# Distinct, saturated colours: one per class, cycled when there are more classes.
_PALETTE = (
    (230, 25, 75),
    (60, 180, 75),
    (0, 130, 200),
    (245, 130, 48),
    (145, 30, 180),
    (70, 240, 240),
    (240, 50, 230),
    (210, 245, 60),
)


def _image(rng: np.random.Generator, imgsz: int, classes: int) -> tuple[Image.Image, list[str]]:
    # One large rectangle on dark noise: a task yolo9-t learns from scratch in a few dozen
    # CPU-seconds, so the demo's metric rises (small, crowded ones stayed at mAP 0 for minutes).
    pixels = rng.integers(0, 64, size=(imgsz, imgsz, 3), dtype=np.uint8)
    cls = int(rng.integers(0, classes))
    w = int(rng.integers(imgsz * 2 // 5, imgsz * 3 // 4 + 1))
    h = int(rng.integers(imgsz * 2 // 5, imgsz * 3 // 4 + 1))
    x0 = int(rng.integers(0, imgsz - w + 1))
    y0 = int(rng.integers(0, imgsz - h + 1))
    pixels[y0 : y0 + h, x0 : x0 + w] = _PALETTE[cls % len(_PALETTE)]
    cx, cy = (x0 + w / 2) / imgsz, (y0 + h / 2) / imgsz
    row = f"{cls} {cx:.6f} {cy:.6f} {w / imgsz:.6f} {h / imgsz:.6f}"
    return Image.fromarray(pixels, "RGB"), [row]


def generate(out_dir: Path, cfg: SyntheticDataset) -> Path:
    """Write the dataset under `out_dir` and return its data.yaml (with an absolute `path`)."""
    out_dir = out_dir.resolve()
    rng = np.random.default_rng(cfg.seed)
    for split, count in (("train", cfg.train), ("val", cfg.val)):
        images = out_dir / "images" / split
        labels = out_dir / "labels" / split
        images.mkdir(parents=True, exist_ok=True)
        labels.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            image, rows = _image(rng, cfg.imgsz, cfg.classes)
            # PNG, not JPEG: lossless, so the bytes are the same on every machine.
            image.save(images / f"{split}_{i:04d}.png")
            (labels / f"{split}_{i:04d}.txt").write_text("\n".join(rows) + "\n")
    names = "\n".join(f"  {i}: class{i}" for i in range(cfg.classes))
    data_yaml = out_dir / "data.yaml"
    data_yaml.write_text(
        f"path: {out_dir}\ntrain: images/train\nval: images/val\n"
        f"nc: {cfg.classes}\nnames:\n{names}\n"
    )
    return data_yaml


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runspec.dataset.synthetic", description="Generate a tiny YOLO dataset."
    )
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--train", type=int, default=8)
    parser.add_argument("--val", type=int, default=4)
    parser.add_argument("--imgsz", type=int, default=128)
    parser.add_argument("--classes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if min(args.train, args.val, args.classes) < 1 or args.imgsz < 16:
        parser.error("--train, --val and --classes must be at least 1, --imgsz at least 16")
    cfg = SyntheticDataset(
        train=args.train, val=args.val, imgsz=args.imgsz, classes=args.classes, seed=args.seed
    )
    print(generate(args.out_dir, cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
