"""How fast `runspec validate` answers: one file (goal < 300 ms) and 1,000 files (goal < 2 s).

Run on demand, never in the suite: `.venv/bin/python bench/bench_validate.py [--runs N]`.
Each figure is the median wall time of N runs of the real command in a fresh subprocess,
start-up included, as a user or a pre-commit hook sees it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((REPO / "specs").glob("*.yaml"))


def _median_seconds(argv: list[str], runs: int, expect: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
        if result.returncode != expect:
            sys.exit(f"{argv[:4]}... exited {result.returncode}: {result.stderr[-500:]}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11, help="runs per figure (default 11)")
    parser.add_argument("--files", type=int, default=1000, help="files in the big call")
    args = parser.parse_args()
    command = [sys.executable, "-m", "runspec", "validate"]

    one = _median_seconds([*command, str(REPO / "specs" / "quickstart.yaml")], args.runs, 0)
    print(f"one file:      median {one * 1000:6.0f} ms over {args.runs} runs (goal < 300 ms)")

    bare = _median_seconds([sys.executable, "-c", "pass"], args.runs, 0)
    print(f"  (python itself starts in {bare * 1000:.0f} ms)")

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for i in range(args.files):
            source = EXAMPLES[i % len(EXAMPLES)]
            text = source.read_text(encoding="utf-8")
            name = f"{source.stem}-{i}"
            # Distinct names, as a real folder of experiments would have.
            (folder / f"{name}.yaml").write_text(
                text.replace(f"name: {_name_of(text)}", f"name: {name}", 1), encoding="utf-8"
            )
        many = _median_seconds([*command, str(folder)], max(3, args.runs // 3), 0)
        each = many / args.files * 1000
        print(f"{args.files} files:    median {many:6.2f} s  ({each:.2f} ms a file; goal < 2 s)")


def _name_of(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("name: "):
            return line.removeprefix("name: ").strip()
    raise SystemExit("an example spec without a name")


if __name__ == "__main__":
    main()
