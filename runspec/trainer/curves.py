"""The training curves as one PNG:
`python -m runspec.trainer.curves METRICS_JSONL OUT_PNG --title T`.

A child program, like the trainer: it imports matplotlib (seconds, and memory the light daemon
does not spend), draws from LibreYOLO's metrics.jsonl (one row per epoch, the last row of an
epoch winning after a resume) and exits. Four panels: the training loss and its parts, the
validation mAP, the watched metric with its best so far, and the learning rate. Exit status 0
with the PNG written, 2 when there is nothing to draw, 1 when drawing failed (matplotlib
missing: `pip install 'libreyolo[plots]'`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from runspec.trainer.observer import read_epochs

EXIT_DRAWN = 0
EXIT_FAILED = 1
EXIT_NOTHING = 2

LOSSES = ("train/loss", "train/box_loss", "train/cls_loss", "train/dfl_loss")
MAPS = ("metrics/mAP50", "metrics/mAP50-95")


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    pairs = [(r["epoch"], float(r[key])) for r in rows if isinstance(r.get(key), int | float)]
    return [e for e, _ in pairs], [v for _, v in pairs]


def draw(rows: list[dict[str, Any]], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display on a rented machine
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    loss, maps, best, lr = axes.flat
    for key in LOSSES:
        epochs, values = _series(rows, key)
        if values:
            loss.plot(epochs, values, marker=".", label=key.removeprefix("train/"))
    loss.set_title("training loss")
    validated = [r for r in rows if r.get("validated")]
    for key in MAPS:
        epochs, values = _series(validated, key)
        if values:
            maps.plot(epochs, values, marker="o", label=key.removeprefix("metrics/"))
    maps.set_title("validation mAP")
    maps.set_ylim(0, 1)  # an mAP is a fraction: a rise from 0.01 to 0.02 is not a cliff
    name = next((str(r["best_metric_name"]) for r in rows if r.get("best_metric_name")), "")
    for key, style in (("current_metric", "o"), ("best_metric", "-")):
        epochs, values = _series(validated if key == "current_metric" else rows, key)
        if values:
            best.plot(epochs, values, style, label=key.replace("_metric", ""))
    best.set_title(f"{name.removeprefix('metrics/') or 'metric'}: each validation, best so far")
    if "mAP" in name:
        best.set_ylim(0, 1)
    epochs, values = _series(rows, "lr/group0")
    if values:
        lr.plot(epochs, values)
    lr.set_title("learning rate")
    for ax in axes.flat:
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    fig.suptitle(title)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    fig.savefig(partial, format="png", dpi=100)
    plt.close(fig)
    partial.replace(out)  # never a half-written PNG in the push


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runspec.trainer.curves")
    parser.add_argument("run_dir", type=Path, help="the LibreYOLO run folder (metrics.jsonl)")
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument("--title", default="", help="the figure's title")
    args = parser.parse_args(argv)
    rows = read_epochs(args.run_dir)
    if not rows:
        print(
            f"runspec.trainer.curves: no epochs in {args.run_dir / 'metrics.jsonl'}",
            file=sys.stderr,
        )
        return EXIT_NOTHING
    try:
        draw(rows, args.out, args.title or args.run_dir.name)
    except ImportError as exc:
        print(f"runspec.trainer.curves: {exc} (pip install 'libreyolo[plots]')", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_DRAWN


if __name__ == "__main__":
    sys.exit(main())
