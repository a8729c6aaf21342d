"""GPU checks on a machine without one: the comparison logic on real CPU tensors, the device
resolution and batch rules against this torch, and the collective with gloo processes (two, and
one: what a single GPU's NCCL check runs)."""

from __future__ import annotations

import pytest
import torch

from runspec.checkresult import CheckStatus
from runspec.preflight.collective import all_reduce, collective_wanted
from runspec.preflight.gpu import _batch_rule, compare_matmul, matmul_check, select_gpus
from runspec.spec.model import TrainSpec


def _product(n: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
    return a, b


def test_a_product_computed_differently_but_correctly_matches() -> None:
    a, b = _product()
    reference = a @ b
    # Half precision stands in for a GPU's TF32/fp16 reductions: close, not bit-equal.
    approximate = (a.half().float() @ b.half().float()).to(torch.float32)
    assert not torch.equal(approximate, reference)
    verdict = compare_matmul(approximate, reference)
    assert verdict.ok and verdict.relative_error < 1e-2


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        (torch.zeros_like, "relative error"),  # a kernel that wrote nothing
        (lambda r: r.t().contiguous(), "relative error"),  # a wrong kernel
        (lambda r: r.index_fill(0, torch.tensor([3]), float("nan")), "NaN"),
        (lambda r: r[:-1], "shape"),
    ],
)
def test_wrong_products_are_caught(broken: object, says: str) -> None:
    a, b = _product()
    reference = a @ b
    verdict = compare_matmul(broken(reference), reference)  # type: ignore[operator]
    assert not verdict.ok and says in verdict.message


def test_the_real_2000x2000_check_runs_on_the_cpu_path() -> None:
    result = matmul_check("cpu")
    assert result.status is CheckStatus.PASS
    assert "2000x2000 product matches the CPU" in result.message


def test_device_resolution_on_this_torch() -> None:
    assert select_gpus(TrainSpec("yolo9-t", 3, device="cpu")).check.status is CheckStatus.PASS
    if torch.cuda.is_available():
        pytest.fail("these tests are written for the GPU-less machines; run the device checks")
    for device in ("0", "0,1", "all"):
        selection = select_gpus(TrainSpec("yolo9-t", 3, device=device))
        assert selection.check.status is CheckStatus.FAIL
        assert "no CUDA GPU" in selection.check.message and selection.gpus == ()


def test_batch_rules_for_the_resolved_gpu_count() -> None:
    auto = _batch_rule(-1, 2)
    assert auto is not None and "sizes one GPU" in auto.message
    uneven = _batch_rule(30, 4)
    assert uneven is not None and "does not divide across 4" in uneven.message
    assert "28" in uneven.fix
    assert _batch_rule(32, 4) is None
    assert _batch_rule(-1, 1) is None


def test_all_reduce_with_two_gloo_ranks() -> None:
    outcome = all_reduce(2, "gloo", timeout=120)
    assert outcome.ok, outcome.message
    assert outcome.missing == ()


def test_all_reduce_with_a_single_rank() -> None:
    # What `--collective-one-gpu` runs on a one-GPU machine, with gloo for nccl.
    outcome = all_reduce(1, "gloo", timeout=120)
    assert outcome.ok, outcome.message
    assert "all_reduce over 1 ranks (gloo)" in outcome.message


def test_the_collective_runs_on_a_single_gpu_only_when_asked() -> None:
    assert collective_wanted(True, 2, one_gpu=False)
    assert not collective_wanted(True, 1, one_gpu=False)  # a run's default: NCCL is unused
    assert collective_wanted(True, 1, one_gpu=True)
    assert not collective_wanted(False, 4, one_gpu=True)  # preflight.collective: false wins
    assert not collective_wanted(True, 0, one_gpu=True)  # device: cpu


def test_a_rank_that_never_joins_fails_at_the_timeout_instead_of_hanging() -> None:
    # Only rank 0 starts: it waits in the rendezvous for rank 1 until the check gives up on
    # both (pytest-timeout would catch a hang).
    outcome = all_reduce(2, "gloo", timeout=10, ranks=[0])
    assert not outcome.ok
    assert outcome.missing == (0, 1)
    assert "timed out after 10 s; rank(s) 0, 1 never answered" in outcome.message
    assert outcome.seconds >= 10
