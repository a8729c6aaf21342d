"""GPU checks: the GPUs `device` asks for exist, the batch fits them, and a real kernel runs.

`cuda.is_available()` says True for a wheel built for another GPU architecture; the first
real kernel then fails with "no kernel image is available". A 2000x2000 matrix product on
every selected GPU, checked against the CPU's result, finds that before training starts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from runspec.checkresult import CheckResult, failed, passed, warned
from runspec.errors import Cause
from runspec.spec.model import TrainSpec

MATMUL_N = 2000
# TF32 or reduced-precision reductions on a GPU give a relative error near 1e-3; a broken
# kernel gives garbage, zeros or NaN, orders of magnitude beyond this.
MATMUL_TOLERANCE = 1e-2


@dataclass(frozen=True)
class Selection:
    gpus: tuple[int, ...]  # indices as torch sees them; empty for device: cpu
    check: CheckResult


def torch_build() -> str:
    cuda = torch.version.cuda
    return f"torch {torch.__version__}, " + (
        f"built for CUDA {cuda}" if cuda else "a CPU-only build"
    )


def select_gpus(train: TrainSpec) -> Selection:
    """Resolve `train.device` on this machine and check the GPUs exist and the batch fits."""
    if train.device == "cpu":
        return Selection((), passed("gpu", "train.device is cpu: GPU checks skipped"))
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    wanted = train.gpu_ids
    asked = f"train.device: {train.device}"
    if count == 0:
        fix = (
            "install a CUDA build of torch for this GPU, then libreyolo"
            if torch.version.cuda is None
            else "run on a machine with an NVIDIA GPU and a working driver (check nvidia-smi)"
        )
        return Selection(
            (),
            failed(
                "gpu",
                f"{asked} needs a GPU, but torch sees no CUDA GPU on this machine "
                f"({torch_build()})",
                f"{fix}, or set train.device: cpu",
                Cause.GPU,
            ),
        )
    gpus = tuple(range(count)) if wanted is None else wanted
    missing = [i for i in gpus if i >= count]
    if missing:
        return Selection(
            (),
            failed(
                "gpu",
                f"{asked} asks for GPU {', '.join(map(str, missing))}, but this machine shows "
                f"{count} (0-{count - 1})",
                f"use GPU indices below {count} in train.device, or rent the GPUs the spec needs",
                Cause.GPU,
            ),
        )
    batch = _batch_rule(train.batch, len(gpus))
    if batch is not None:
        return Selection(gpus, batch)
    described = "; ".join(describe_gpu(i) for i in gpus)
    return Selection(gpus, passed("gpu", f"{len(gpus)} GPU(s): {described}"))


def _batch_rule(batch: int, n: int) -> CheckResult | None:
    if batch == -1 and n > 1:
        return failed(
            "gpu",
            f"train.batch: -1 (auto) sizes one GPU, but train.device selects {n} here",
            "give a global batch divisible by the GPU count, or select one GPU",
        )
    if batch > 0 and batch % n:
        return failed(
            "gpu",
            f"train.batch: {batch} is the global batch and does not divide across {n} GPUs",
            f"use a multiple of {n} (e.g. {batch - batch % n or n})",
        )
    return None


def describe_gpu(index: int) -> str:
    props = torch.cuda.get_device_properties(index)
    free, total = torch.cuda.mem_get_info(index)
    return (
        f"{index}: {props.name}, compute {props.major}.{props.minor}, "
        f"{free / 2**30:.1f} of {total / 2**30:.1f} GiB free"
    )


def arch_supported(index: int) -> CheckResult | None:
    """A warning when this torch ships no kernels for the GPU's architecture."""
    major, minor = torch.cuda.get_device_capability(index)
    archs = torch.cuda.get_arch_list()
    sm = f"sm_{major}{minor}"
    # PTX for an older architecture can be compiled for a newer GPU by the driver.
    ptx_ok = any(
        a.startswith("compute_") and int(a.split("_")[1]) <= major * 10 + minor for a in archs
    )
    if sm in archs or ptx_ok:
        return None
    return warned(
        f"gpu {index} arch",
        f"{torch_build()} ships kernels for {', '.join(archs)}, not {sm}",
        f"install a torch wheel built for compute capability {major}.{minor}",
    )


@dataclass(frozen=True)
class MatmulComparison:
    ok: bool
    relative_error: float
    message: str


def compare_matmul(result: torch.Tensor, reference: torch.Tensor) -> MatmulComparison:
    """Whether a device's product matches the CPU's, by relative Frobenius error."""
    if result.shape != reference.shape:
        return MatmulComparison(
            False, float("inf"), f"shape {tuple(result.shape)} != {tuple(reference.shape)}"
        )
    result = result.detach().to("cpu", torch.float64)
    reference = reference.detach().to("cpu", torch.float64)
    if not bool(torch.isfinite(result).all()):
        return MatmulComparison(False, float("inf"), "the result holds NaN or infinity")
    scale = float(torch.linalg.matrix_norm(reference)) or 1.0
    error = float(torch.linalg.matrix_norm(result - reference)) / scale
    if error > MATMUL_TOLERANCE:
        return MatmulComparison(
            False,
            error,
            f"relative error {error:.2e} against the CPU (tolerance {MATMUL_TOLERANCE:.0e})",
        )
    return MatmulComparison(True, error, f"relative error {error:.1e}")


def matmul_check(device: str, n: int = MATMUL_N) -> CheckResult:
    """A real n x n product on `device` ("cuda:0"; "cpu" exercises the same path) vs the CPU."""
    name = f"matmul {device}"
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=generator)
    b = torch.randn(n, n, generator=generator)
    reference = a @ b
    started = time.monotonic()
    try:
        result = a.to(device) @ b.to(device)
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
        result = result.cpu()
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        fix = (
            "this torch has no kernels for this GPU: install a torch wheel built for its "
            "compute capability, then libreyolo"
            if "no kernel image" in str(exc)
            else "check the driver and the GPU (nvidia-smi); rent another machine if it persists"
        )
        return failed(name, f"a {n}x{n} matrix product failed: {first}", fix, Cause.GPU)
    seconds = time.monotonic() - started
    verdict = compare_matmul(result, reference)
    if not verdict.ok:
        return failed(
            name,
            f"a {n}x{n} matrix product is wrong: {verdict.message}",
            "the GPU or its torch build computes wrong results; reinstall torch for this GPU "
            "or rent another machine",
            Cause.GPU,
        )
    return passed(name, f"{n}x{n} product matches the CPU ({verdict.message}, {seconds:.2f} s)")
