"""The share of a budget that trains: 8 h (goal: at least 98 %), 1 h and 24 h.

Two halves, and what is real in each:

1. Measured here, medians of --runs: the preflight (the real `machine` phase in its child, on
   this CPU machine: no GPU checks), dataset staging (bench_staging's real staging of a tar
   through the local Hub server at the link rate, scaled to --dataset-gb), a push of a
   real-size checkpoint (--ckpt-mb, runspec's Hub target: hash, one commit, verify at the
   commit) and its read-back, both through tests/hubserver.py pacing every body to --link-mbs,
   and the snapshot copy a push makes of a checkpoint before it sends it.
2. Driven by runspec.clock.ManualClock, the run itself, with the real planner
   (runspec.budget.Planner: reserve, measured upload rate, point of no return), the real fit
   (runspec.budgetfit.plan from the profile's epoch) and the trainer's own stop rule at each
   epoch boundary (runspec.trainer.child.StopControl: no epoch that would end past the stop time):
   a stand-in trainer's GPU-like epochs of --epoch-min minutes (1 % noise, every tenth
   validating and --val-extra longer), a push after every epoch (last.pt, best.pt) taking the
   measured time for its bytes while training goes on, the final push, the read-back and the
   finish. Not measured here (no GPU): the trainer's start (--start-s: imports, model,
   AutoBatch, loaders), the profile (--profile-s) and the finish's provider call
   (--finish-s); they are options, printed with the table.

The share counts training epochs that count (completed, their weights pushed); the table
gives the minutes of each fixed cost, "unused at the end" being the budget left when the
finish is done (the epoch that no longer fitted, or the fit's margin). "time to first step" is
from the spec's arrival (queued = started here) to the first training step.

    .venv/bin/python bench/bench_budget_share.py [--runs 3] [--link-mbs 50] [--ckpt-mb 200]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_push import make_file  # noqa: E402

SPEC = """\
runspec: 1
name: share
dataset: {{synthetic: {{}}}}
train: {{model: yolo9-t, epochs: {epochs}, device: cpu, save_period: 10}}
push: {{hub: {{repo: bench/share}}}}
budget: {{wall_clock: {hours}h, fit: {fit}}}
preflight: {{doctor: false, profile: true}}
finish: {{action: destroy, provider: vast}}
"""


@dataclass(frozen=True)
class Measured:
    preflight_s: float
    staging_s: float
    push_s_per_mb: float  # a checkpoint push, per MB of it, at the link rate
    push_overhead_s: float  # the push's fixed part (commit, verify)
    read_back_s_per_mb: float
    copy_s: float  # the snapshot copy of one checkpoint


def measure_preflight(work: Path, runs: int) -> float:
    from runspec.preflight import run_preflight
    from runspec.spec.loader import load_spec_text
    from runspec.store.paths import RunPaths

    spec = load_spec_text(
        SPEC.format(epochs=10, hours=8, fit="none")
        .replace("push: {hub: {repo: bench/share}}", f"push: {{dir: {work / 'pushed'}}}")
        .replace("action: destroy, provider: vast", "action: none"),
        "bench.yaml",
    )
    paths = RunPaths.for_spec(spec, work / "state-pre")
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        run_preflight(spec, paths, "machine", timeout=300)
        took.append(time.perf_counter() - start)
    return statistics.median(took)


def measure_push(server: Any, work: Path, mb: int, runs: int) -> tuple[float, float, float]:
    """Median seconds: push + verify of one `mb` checkpoint, its read-back, its copy."""
    from runspec.push.base import StagedFile
    from runspec.push.hub import HubTarget
    from runspec.push.manifest import ManifestEntry, digest_file

    ckpt = work / "last.pt"
    make_file(ckpt, mb)
    pushes, reads, copies = [], [], []
    for i in range(runs):
        start = time.perf_counter()
        staged = work / "staged.pt"
        shutil.copyfile(ckpt, staged)
        copies.append(time.perf_counter() - start)
        target = HubTarget(f"bench/share{i}")
        start = time.perf_counter()
        digest = digest_file(staged)
        entry = ManifestEntry("weights/last.pt", digest.size, digest.sha256, 1, "", digest.blob_id)
        item = StagedFile(entry, staged)
        commit = target.push([item], "runspec: epoch 1")
        assert not target.verify(commit, [entry], [item])
        pushes.append(time.perf_counter() - start)
        start = time.perf_counter()
        assert not target.read_back(commit, [entry])
        reads.append(time.perf_counter() - start)
        # The next push sends every byte again.
        shutil.rmtree(server.storage / "lfs")
        (server.storage / "lfs").mkdir()
        server.repos.clear()
    return statistics.median(pushes), statistics.median(reads), statistics.median(copies)


def measure(args: argparse.Namespace, work: Path) -> Measured:
    import bench_staging

    server = bench_staging.start_server(work)
    try:
        rate = args.link_mbs * 1e6
        size = bench_staging.seed(server, work, args.dataset_sample_mb)
        staged = bench_staging.measure(server, work, args.runs, rate)["stage_s"]
        staging_s = staged * args.dataset_gb * 1e9 / size
        server.link_rate = rate
        push_s, read_s, copy_s = measure_push(server, work, args.ckpt_mb, args.runs)
        server.link_rate = None
    finally:
        server.stop()
    preflight_s = measure_preflight(work, args.runs)
    # The push's fixed part: what is left over the bytes at the link rate.
    overhead = max(0.0, push_s - args.ckpt_mb / args.link_mbs)
    return Measured(
        preflight_s=preflight_s,
        staging_s=staging_s,
        push_s_per_mb=(push_s - overhead) / args.ckpt_mb,
        push_overhead_s=overhead,
        read_back_s_per_mb=read_s / args.ckpt_mb,
        copy_s=copy_s,
    )


@dataclass
class Costs:
    preflight: float = 0.0
    staging: float = 0.0
    profile: float = 0.0
    trainer_start: float = 0.0
    push_stalls: float = 0.0  # pushes that stall training: they run beside it
    final_push: float = 0.0
    read_back: float = 0.0
    finish: float = 0.0
    unused: float = 0.0
    trained: float = 0.0
    epochs: int = 0
    planned: int = 0
    first_step: float = 0.0


def simulate(args: argparse.Namespace, m: Measured, hours: float, fit: str, seed: int) -> Costs:
    from runspec.budget import Planner, validates
    from runspec.budgetfit import plan
    from runspec.clock import ManualClock
    from runspec.spec.loader import load_spec_text

    rng = random.Random(seed)
    spec = load_spec_text(SPEC.format(epochs=args.epochs, hours=hours, fit=fit), "bench.yaml")
    clock = ManualClock()
    start = clock.time()
    deadline = start + spec.budget.wall_clock
    costs = Costs()
    for name, seconds in (
        ("preflight", m.preflight_s),
        ("staging", m.staging_s),
        ("profile", args.profile_s),
    ):
        setattr(costs, name, seconds)
        clock.advance(seconds)
    epoch_s = args.epoch_min * 60.0
    fitted = plan(spec, epoch_s * (1 - args.profile_error), deadline - clock.time())
    total = fitted.epochs if fitted is not None else spec.train.epochs
    costs.planned = total
    costs.trainer_start = args.start_s
    clock.advance(args.start_s)
    costs.first_step = clock.time() - start
    planner = Planner(deadline, None, clock, finish_seconds=args.finish_s)
    ckpt = args.ckpt_mb * 1e6
    push_done_at = clock.time()  # when the pusher is free again
    # Bytes not yet verified at each boundary: the newest epoch's last.pt and best.pt.
    pending = 2 * ckpt
    done, longest = 0, 0.0
    upload_rate: float | None = None
    while done < total:
        if done:
            predicted = planner.predict_epoch(validates(done + 1, total, 10)) or longest
            stop = planner.point_of_no_return(int(pending), upload_rate)
            if clock.time() + predicted > stop:
                break  # the trainer's rule: this epoch would end past the stop time
        took = epoch_s * rng.gauss(1.0, 0.01)
        if validates(done + 1, total, 10):
            took *= 1 + args.val_extra
        clock.advance(took)
        done += 1
        costs.trained += took
        longest = max(longest, took)
        planner.record_epoch(done, took, validates(done, total, 10))
        # The push of this epoch's files runs beside the next epoch (a push of a full epoch's
        # bytes at the link rate takes seconds of a 9-minute epoch).
        begin = max(clock.time(), push_done_at)
        push_s = m.push_overhead_s + 2 * args.ckpt_mb * m.push_s_per_mb
        push_done_at = begin + push_s
        upload_rate = 2 * ckpt / push_s  # what the Pusher measures and hands the planner
    costs.epochs = done
    # The final push: what the last epoch left, after any push still under way.
    costs.final_push = max(0.0, push_done_at - clock.time()) + m.push_overhead_s
    costs.final_push += 2 * args.ckpt_mb * m.push_s_per_mb
    costs.read_back = 2 * args.ckpt_mb * m.read_back_s_per_mb
    costs.finish = args.finish_s
    clock.advance(costs.final_push + costs.read_back + costs.finish)
    costs.unused = deadline - clock.time()
    return costs


def median_costs(runs: list[Costs]) -> Costs:
    out = Costs()
    for name in Costs.__dataclass_fields__:
        values = [getattr(c, name) for c in runs]
        setattr(out, name, statistics.median(values))
    return out


ROWS = (
    ("preflight", "preflight"),
    ("staging", "staging"),
    ("profile", "profile"),
    ("trainer start", "trainer_start"),
    ("pushes that stall training", "push_stalls"),
    ("final push", "final_push"),
    ("read-back", "read_back"),
    ("finish", "finish"),
    ("unused at the end", "unused"),
)


def table(args: argparse.Namespace, results: dict[tuple[float, str], Costs]) -> list[str]:
    keys = list(results)
    head = " | ".join(f"{h:g} h fit {f}" for h, f in keys)
    lines = [f"| minutes | {head} |", "| --- |" + " --- |" * len(keys)]
    for label, name in ROWS:
        cells = " | ".join(f"{getattr(results[k], name) / 60:.1f}" for k in keys)
        lines.append(f"| {label} | {cells} |")
    cells = " | ".join(f"{results[k].first_step / 60:.1f}" for k in keys)
    lines.append(f"| time to first step | {cells} |")
    cells = " | ".join(f"{results[k].epochs:g} of {results[k].planned:g}" for k in keys)
    lines.append(f"| epochs trained of planned | {cells} |")
    cells = " | ".join(f"**{100 * results[k].trained / (k[0] * 3600):.1f} %**" for k in keys)
    lines.append(f"| share of the budget training | {cells} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="measurements and simulations each")
    parser.add_argument("--hours", type=float, nargs="+", default=[8.0, 1.0, 24.0])
    parser.add_argument("--epochs", type=int, default=1000, help="train.epochs (more than fit)")
    parser.add_argument("--epoch-min", type=float, default=9.0)
    parser.add_argument("--val-extra", type=float, default=0.05, help="a validating epoch's")
    parser.add_argument("--profile-error", type=float, default=0.0, help="profile too short by")
    parser.add_argument("--ckpt-mb", type=int, default=200)
    parser.add_argument("--link-mbs", type=float, default=50.0, help="push link, MB/s")
    parser.add_argument("--dataset-gb", type=float, default=2.0)
    parser.add_argument("--dataset-sample-mb", type=int, default=200, help="the tar staged")
    parser.add_argument("--start-s", type=float, default=60.0, help="the trainer's start")
    parser.add_argument("--profile-s", type=float, default=45.0)
    parser.add_argument("--finish-s", type=float, default=10.0, help="the provider's call")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-share-") as tmp:
        measured = measure(args, Path(tmp))
    print(
        f"measured (medians of {args.runs}): preflight {measured.preflight_s:.1f} s, staging "
        f"{args.dataset_gb:g} GB {measured.staging_s:.1f} s, a {args.ckpt_mb} MB push "
        f"{measured.push_overhead_s + args.ckpt_mb * measured.push_s_per_mb:.1f} s at "
        f"{args.link_mbs:g} MB/s, its read-back {args.ckpt_mb * measured.read_back_s_per_mb:.1f}"
        f" s, its snapshot copy {measured.copy_s:.2f} s"
    )
    print(
        f"given: {args.epoch_min:g}-minute epochs (validating +{100 * args.val_extra:.0f} %), "
        f"trainer start {args.start_s:g} s, profile {args.profile_s:g} s, finish "
        f"{args.finish_s:g} s, profile error {100 * args.profile_error:.0f} %"
    )
    results: dict[tuple[float, str], Costs] = {}
    for hours in args.hours:
        for fit in ("epochs", "none"):
            runs = [simulate(args, measured, hours, fit, seed) for seed in range(args.runs)]
            results[(hours, fit)] = median_costs(runs)
    print("\n".join(table(args, results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
