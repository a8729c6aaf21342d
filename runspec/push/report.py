"""What the final push carries besides the run folder's files: the training curves as a PNG
(drawn by a child program, runspec.trainer.curves: the daemon never imports matplotlib) and the
model card, both written into the job folder's report/ first (runspec.store.paths), so a push only
ever sends whole files."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from runspec.childpython import isolated
from runspec.push.card import model_card
from runspec.spec.model import Spec
from runspec.store.atomic import write_text
from runspec.store.paths import RunPaths
from runspec.store.state import RunRecord
from runspec.voice import warning

CURVES_TIMEOUT_S = 120.0  # a few seconds' work; a child stuck in a font cache is not waited on
PLOTS = "val/plots/*.png"  # where LibreYOLO draws its validation plots (train.args.save_plots)


def libreyolo_plots(run_dir: Path) -> list[str]:
    """LibreYOLO's validation plots in the run folder, relative to it."""
    return sorted(p.relative_to(run_dir).as_posix() for p in run_dir.glob(PLOTS) if p.is_file())


def draw_curves(spec: Spec, paths: RunPaths, say: Callable[[str], None]) -> bool:
    """The curves PNG in the report folder; False (said why) when none could be drawn."""
    title = f"{spec.name}: {spec.train.model}"
    cmd = isolated(
        sys.executable, "runspec.trainer.curves", str(paths.run_dir), str(paths.curves_png)
    )
    try:
        proc = subprocess.run(
            [*cmd, "--title", title],
            capture_output=True,
            text=True,
            timeout=CURVES_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        say(warning(f"no training curves: {exc}"))
        return False
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        say(warning(f"no training curves: {tail}"))
        return False
    return paths.curves_png.is_file()


def prepare(spec: Spec, paths: RunPaths, record: RunRecord, say: Callable[[str], None]) -> None:
    """Write the curves and the model card for the final push (never raises for a picture)."""
    paths.report_dir.mkdir(parents=True, exist_ok=True)
    paths.curves_png.unlink(missing_ok=True)  # a run resumed after a push: draw afresh
    curves = draw_curves(spec, paths, say) if record.epoch > 0 else False
    cost = record.cost.usd if record.cost else None
    card = model_card(spec, paths, record, cost, curves, libreyolo_plots(paths.run_dir))
    write_text(paths.model_card, card)
