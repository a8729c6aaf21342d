"""What the trainer's and the preflight's start costs in CPU, plain and inside heavy_imports.

    .venv/bin/python bench/bench_child_start.py [--runs 5]

Each run starts two fresh interpreters one after the other: one imports torch, torchvision and
LibreYOLO as Python does by default, the other inside runspec.trainer.heavyimports'
`heavy_imports` (as `python -m runspec.trainer` and the preflight child do). Each reports
its own CPU time for the imports, the time its collector spent collecting, and whether
TorchDynamo got imported. Prints every run,
the medians and their ratio; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

_CHILD = """
import gc, json, sys, time
sys.path.insert(0, {repo!r})
spent = [0.0, 0]
started = [0.0]
def clock(phase, info):
    if phase == "start":
        started[0] = time.perf_counter()
    else:
        spent[0] += time.perf_counter() - started[0]
        spent[1] += 1
gc.callbacks.append(clock)
from runspec.trainer.heavyimports import heavy_imports
cpu = time.process_time()
if {frozen}:
    with heavy_imports():
        import torch, torchvision, libreyolo
else:
    import torch, torchvision, libreyolo
print(json.dumps({{"cpu": time.process_time() - cpu, "gc_s": spent[0], "collections": spent[1],
                  "dynamo": "torch._dynamo" in sys.modules}}))
"""


def one(frozen: bool) -> dict[str, Any]:
    code = _CHILD.format(repo=str(REPO), frozen=frozen)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    plain: list[dict[str, Any]] = []
    frozen: list[dict[str, Any]] = []
    for i in range(args.runs):
        plain.append(one(False))
        frozen.append(one(True))
        print(
            f"run {i + 1}: default {plain[-1]['cpu']:.2f} s CPU "
            f"({plain[-1]['collections']:.0f} collections, {plain[-1]['gc_s']:.2f} s);"
            f" dynamo {plain[-1]['dynamo']}; inside heavy_imports {frozen[-1]['cpu']:.2f} s,"
            f" dynamo {frozen[-1]['dynamo']}"
        )
    base = statistics.median(r["cpu"] for r in plain)
    new = statistics.median(r["cpu"] for r in frozen)
    in_gc = statistics.median(r["gc_s"] for r in plain)
    print(
        f"import torch, torchvision, libreyolo, median of {args.runs}: {base:.2f} s CPU by "
        f"default ({in_gc:.2f} s of it collecting), {new:.2f} s inside heavy_imports "
        f"({new / base:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
