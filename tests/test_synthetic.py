"""The synthetic dataset: deterministic, labels that match the pictures, and its CLI.
(LibreYOLO trains on it in every test of test_trainer.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

from runspec.dataset.synthetic import _PALETTE, generate
from runspec.spec.model import SyntheticDataset


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "data.yaml"
    }


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    cfg = SyntheticDataset(train=3, val=2, imgsz=64, classes=3, seed=7)
    generate(tmp_path / "a", cfg)
    generate(tmp_path / "b", cfg)
    generate(tmp_path / "c", SyntheticDataset(train=3, val=2, imgsz=64, classes=3, seed=8))
    a, b, c = _tree(tmp_path / "a"), _tree(tmp_path / "b"), _tree(tmp_path / "c")
    assert len(a) == 10 and a == b
    assert a != c


def test_labels_match_the_rectangles(tmp_path: Path) -> None:
    data_yaml = generate(tmp_path / "d", SyntheticDataset(train=6, val=2, imgsz=96, classes=4))
    meta = yaml.safe_load(data_yaml.read_text())
    root = Path(meta["path"])
    assert root.is_absolute() and meta["nc"] == 4 and len(meta["names"]) == 4
    assert (root / meta["train"]).is_dir() and (root / meta["val"]).is_dir()
    for image_path in sorted((root / "images" / "train").glob("*.png")):
        pixels = np.asarray(Image.open(image_path))
        assert pixels.shape == (96, 96, 3)
        label = root / "labels" / "train" / (image_path.stem + ".txt")
        rows = [line.split() for line in label.read_text().splitlines()]
        assert 1 <= len(rows) <= 3
        for row in rows:
            cls, cx, cy, w, h = int(row[0]), *map(float, row[1:])
            assert 0 <= cls < 4 and 0 < w <= 1 and 0 < h <= 1
            eps = 1e-5  # labels carry 6 decimals
            assert w / 2 - eps <= cx <= 1 - w / 2 + eps and h / 2 - eps <= cy <= 1 - h / 2 + eps
        # The last rectangle drawn is never covered: its centre has its class's colour.
        cls, cx, cy = int(rows[-1][0]), float(rows[-1][1]), float(rows[-1][2])
        centre = pixels[int(cy * 96), int(cx * 96)]
        assert tuple(int(v) for v in centre) == _PALETTE[cls]


def test_cli_prints_the_data_yaml(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "runspec.dataset.synthetic",
            str(tmp_path / "s"),
            "--train",
            "2",
            "--val",
            "1",
            "--imgsz",
            "32",
            "--classes",
            "2",
            "--seed",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    data_yaml = Path(out.stdout.strip())
    assert data_yaml == (tmp_path / "s" / "data.yaml").resolve()
    assert len(list((tmp_path / "s" / "images" / "train").glob("*.png"))) == 2
    bad = subprocess.run(
        [sys.executable, "-m", "runspec.dataset.synthetic", str(tmp_path / "t"), "--train", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert bad.returncode == 2 and "at least 1" in bad.stderr
