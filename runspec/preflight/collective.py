"""A real all_reduce across the selected GPUs, with a timeout: a hang is a failure, not a freeze.

One process per rank (spawned, so CUDA is initialised in each), rendezvous over TCP on
127.0.0.1. The parent waits for every rank's answer up to the timeout; ranks that have not
answered by then are killed (they are our own children) and named in the failure.
"""

from __future__ import annotations

import multiprocessing
import queue
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from runspec.checkresult import CheckResult, failed, passed
from runspec.errors import Cause

# A rank's process must end within this once told to, or it is killed.
_JOIN_S = 5.0


@dataclass(frozen=True)
class CollectiveOutcome:
    ok: bool
    message: str
    missing: tuple[int, ...]  # ranks that never answered
    seconds: float


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class RankJob:
    rank: int
    world: int
    backend: str
    port: int
    device: int | None  # the rank's GPU; None: CPU tensors (gloo)
    timeout: float


def _rank_main(job: RankJob, answers: multiprocessing.Queue) -> None:
    import torch
    import torch.distributed as dist

    rank, world, device = job.rank, job.world, job.device
    try:
        if device is not None:
            torch.cuda.set_device(device)
        dist.init_process_group(
            job.backend,
            init_method=f"tcp://127.0.0.1:{job.port}",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=job.timeout),
        )
        where = f"cuda:{device}" if device is not None else "cpu"
        tensor = torch.full((1024,), float(rank + 1), device=where)
        dist.all_reduce(tensor)
        if device is not None:
            torch.cuda.synchronize(device)
        expected = world * (world + 1) / 2
        got = float(tensor[0].item())
        answers.put((rank, got == expected, f"sum {got:g}, expected {expected:g}"))
        dist.destroy_process_group()
    except Exception as exc:  # the parent reports it; a rank has no one else to tell
        answers.put((rank, False, f"{type(exc).__name__}: {exc}".splitlines()[0]))


def all_reduce(
    world: int,
    backend: str,
    timeout: float,
    devices: Sequence[int] | None = None,
    ranks: Sequence[int] | None = None,
) -> CollectiveOutcome:
    """all_reduce across `world` ranks; `ranks` limits which are started (the others never join).

    `devices[i]` is rank i's GPU (None: CPU tensors, for gloo). The whole check, process start
    and imports included, is bounded by `timeout` seconds.
    """
    ctx = multiprocessing.get_context("spawn")
    answers: multiprocessing.Queue = ctx.Queue()
    port = _free_port()
    started = time.monotonic()
    deadline = started + timeout
    procs = {}
    for rank in ranks if ranks is not None else range(world):
        device = devices[rank] if devices is not None else None
        proc = ctx.Process(
            target=_rank_main,
            args=(RankJob(rank, world, backend, port, device, timeout), answers),
            daemon=True,
        )
        proc.start()
        procs[rank] = proc
    results: dict[int, tuple[bool, str]] = {}
    while len(results) < len(procs) and (left := deadline - time.monotonic()) > 0:
        try:
            rank, ok, detail = answers.get(timeout=min(left, 1.0))
        except queue.Empty:
            continue
        results[rank] = (ok, detail)
    for proc in procs.values():
        proc.join(timeout=max(0.0, min(_JOIN_S, deadline + _JOIN_S - time.monotonic())))
        if proc.is_alive():
            proc.kill()  # our own child, started above: its identity is known
            proc.join(timeout=_JOIN_S)
    seconds = time.monotonic() - started
    missing = tuple(r for r in range(world) if r not in results)
    bad = {r: d for r, (ok, d) in results.items() if not ok}
    if missing:
        return CollectiveOutcome(
            False,
            f"all_reduce over {world} ranks ({backend}) timed out after {timeout:.0f} s; "
            f"rank(s) {', '.join(map(str, missing))} never answered",
            missing,
            seconds,
        )
    if bad:
        rank, detail = next(iter(sorted(bad.items())))
        return CollectiveOutcome(False, f"all_reduce failed on rank {rank}: {detail}", (), seconds)
    return CollectiveOutcome(
        True, f"all_reduce over {world} ranks ({backend}) in {seconds:.1f} s", (), seconds
    )


def collective_wanted(asked: bool, gpus: int, one_gpu: bool) -> bool:
    """Whether to run the all_reduce: across 2+ GPUs when the spec asks; on a single GPU only
    when `one_gpu` says so too (single-GPU training never uses NCCL, so a run does not pay for
    it; a machine check before renting more of the same kind does)."""
    return asked and (gpus > 1 or (gpus == 1 and one_gpu))


def collective_check(gpus: Sequence[int], timeout: float) -> CheckResult:
    outcome = all_reduce(len(gpus), "nccl", timeout, devices=list(gpus))
    if outcome.ok:
        return passed("collective", outcome.message)
    return failed(
        "collective",
        outcome.message,
        "multi-GPU training would hang or fail the same way: check NCCL (NCCL_DEBUG=INFO), "
        "the GPU interconnect (nvidia-smi topo -m), or train on one GPU",
        Cause.LINK,
    )
