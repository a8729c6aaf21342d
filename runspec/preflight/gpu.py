"""GPU checks: the GPUs `device` asks for exist, the batch fits them, and a real kernel runs.

`cuda.is_available()` says True for a wheel built for another GPU architecture; the first
real kernel then fails with "no kernel image is available". A 2000x2000 matrix product on
every selected GPU, checked against the CPU's result, finds that before training starts.

When torch sees no GPU, the check decides whether any machine of this kind could pass, and
types it (runspec.errors.Cause): a CPU-only torch, no NVIDIA device at all, or a driver older
than the CUDA torch is built for is MACHINE_KIND (an engine is told exit 2: a fresh machine of
the same image fails the same way); a driver that shows no GPU is this machine's (GPU, 75).
"""

from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from runspec.checkresult import CheckResult, failed, passed, warned
from runspec.errors import Cause
from runspec.spec.model import TrainSpec

MATMUL_N = 2000
# TF32 or reduced-precision reductions on a GPU give a relative error near 1e-3; a broken
# kernel gives garbage, zeros or NaN, orders of magnitude beyond this.
MATMUL_TOLERANCE = 1e-2
# The device node every NVIDIA driver makes; a container given GPUs has it too.
NVIDIA_DEVICE = Path("/dev/nvidiactl")
# torch's words when cudaGetDeviceCount answers cudaErrorInsufficientDriver: its device count
# (c10/cuda/CUDAFunctions.cpp, device_count_impl and device_count) counts 0 GPUs and warns
# "CUDA initialization: The NVIDIA driver on your system is too old (found version N)", N as
# cudaDriverGetVersion gives it (11040: CUDA 11.4); torch.cuda.is_available() then says False.
_TOO_OLD = re.compile(r"NVIDIA driver on your system is too old \(found version (\d{1,9})\)")


@dataclass(frozen=True)
class Selection:
    gpus: tuple[int, ...]  # indices as torch sees them; empty for device: cpu
    check: CheckResult


def torch_build() -> str:
    cuda = torch.version.cuda
    return f"torch {torch.__version__}, " + (
        f"built for CUDA {cuda}" if cuda else "a CPU-only build"
    )


@dataclass(frozen=True)
class CudaSeen:
    count: int  # the CUDA GPUs torch sees
    old_driver: int | None = None  # the driver's CUDA version when torch found it too old


def cuda_seen() -> CudaSeen:
    """The GPUs torch sees, and whether it found the driver too old for its CUDA build. The one
    place torch's words about the driver are read (its warning, the only form it gives them),
    typed from here on. torch counts once per process: the preflight's child asks first."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    old_driver = None
    for warning in said:
        found = _TOO_OLD.search(str(warning.message))
        if found is not None:
            old_driver = int(found.group(1))
        else:  # any other word of torch's goes on as it would have (the child's stderr)
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    return CudaSeen(count, old_driver)


def no_gpu(asked: str, seen: CudaSeen) -> CheckResult:
    """Why torch sees no GPU, typed by whether a fresh machine of this kind would."""
    none = f"{asked} needs a GPU, but torch sees no CUDA GPU"
    cpu = "or set train.device: cpu"
    if torch.version.cuda is None:
        fix = f"install a CUDA build of torch for this GPU, then libreyolo, {cpu}"
        return failed("gpu", f"{none} ({torch_build()})", fix, Cause.MACHINE_KIND)
    if seen.old_driver is not None:
        major, minor = seen.old_driver // 1000, seen.old_driver % 1000 // 10
        return failed(
            "gpu",
            f"{none}: the NVIDIA driver supports CUDA up to {major}.{minor} and torch "
            f"{torch.__version__} is built for CUDA {torch.version.cuda} (the driver is too old "
            "for this torch)",
            f"install a torch built for CUDA {major}.{minor} or older (pip install torch "
            f"--index-url https://download.pytorch.org/whl/cuXY, XY at most {major}{minor}), "
            f"then libreyolo; or pick an image whose driver supports CUDA {torch.version.cuda}",
            Cause.MACHINE_KIND,
        )
    if not NVIDIA_DEVICE.exists():
        return failed(
            "gpu",
            f"{none}: this machine has no NVIDIA device ({NVIDIA_DEVICE} is missing; "
            f"{torch_build()})",
            f"run on a machine with an NVIDIA GPU (under an engine: its resources ask for one), "
            f"{cpu}",
            Cause.MACHINE_KIND,
        )
    return failed(
        "gpu",
        f"{none} on this machine ({torch_build()})",
        f"check the driver and its GPUs (nvidia-smi); another machine may work, {cpu}",
        Cause.GPU,
    )


def select_gpus(train: TrainSpec) -> Selection:
    """Resolve `train.device` on this machine and check the GPUs exist and the batch fits."""
    if train.device == "cpu":
        return Selection((), passed("gpu", "train.device is cpu: GPU checks skipped"))
    seen = cuda_seen()
    count = seen.count
    wanted = train.gpu_ids
    asked = f"train.device: {train.device}"
    if count == 0:
        return Selection((), no_gpu(asked, seen))
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
