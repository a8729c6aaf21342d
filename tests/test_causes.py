"""A failure's cause is typed where it is caught (issue 38): the trainer's result, a preflight
check and the run's record carry it as a `Cause`, and only that asks an engine for a fresh
machine (runspec.engines.onbox; its table test reads the record's cause)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from collections import deque
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from runspec.checkresult import CheckResult, CheckStatus, failed
from runspec.engines.onbox import engine_outcome
from runspec.errors import Cause, Outcome
from runspec.machine.verdict import Safety
from runspec.preflight import gpu
from runspec.preflight.gpu import _batch_rule
from runspec.preflight.report import PreflightReport
from runspec.run.exitstep import ExitFacts, Step, next_step
from runspec.spec.model import TrainSpec
from runspec.store.state import RunRecord, Termination
from runspec.trainer import multinode
from runspec.trainer.control import TrainerOutcome, TrainerResult
from runspec.trainer.faults import cause_of, cause_of_line, out_of_space, out_of_space_line
from runspec.trainer.peerwatch import PeerHung
from tests.fixtures_run import RUNSPEC, SpecWriter


@pytest.mark.parametrize(
    ("exc", "cause"),
    [
        (dist.DistNetworkError("Connection reset by peer"), Cause.LINK),
        (dist.DistBackendError("NCCL error in: ProcessGroupNCCL.cpp:1970"), Cause.LINK),
        (PeerHung("rank 1 gave no sign of life for 20 s"), Cause.LINK),
        (torch.AcceleratorError("CUDA error: an illegal memory access"), Cause.GPU),
        (RuntimeError("CUDA error: uncorrectable ECC error encountered"), Cause.GPU),
        (RuntimeError("[gloo/transport/tcp/pair.cc:545] Connection closed by peer"), Cause.LINK),
        (multinode.TorchrunFailed("rendezvous timed out", Cause.LINK), Cause.LINK),
        (KeyError("names"), None),
        # LibreYOLO's or Python's own typed errors are the run's, whatever words they carry.
        (ValueError("train.args NCCL_DEBUG is unknown; CUDA error names are not options"), None),
        (RuntimeError("shapes cannot be multiplied\nNCCL in a later line of a traceback"), None),
    ],
)
def test_an_error_is_given_its_cause_where_it_is_caught(
    exc: BaseException, cause: Cause | None
) -> None:
    assert cause_of(exc) is cause


def test_a_ranks_error_line_and_torchruns_words_give_torchruns_failure_its_cause(
    tmp_path: Path,
) -> None:
    hung = PeerHung("rank 1 gave no sign of life for 20 s")
    multinode.write_rank_error(tmp_path, hung)
    why, cause = multinode._why(tmp_path, 1, deque(), 5)
    assert why.endswith("PeerHung: rank 1 gave no sign of life for 20 s") and cause is Cause.LINK
    (tmp_path / "rank-0.error").unlink()
    why, cause = multinode._why(tmp_path, 1, deque(["DistStoreError: waiting for clients"]), 5)
    assert why.startswith("rendezvous timed out") and cause is Cause.LINK
    why, cause = multinode._why(tmp_path, 1, deque(["KeyError: 'names'"]), 5)
    assert why == "torchrun: KeyError: 'names'" and cause is None
    assert cause_of_line("RuntimeError", "NCCL error: unhandled system error") is Cause.LINK


def test_the_cause_travels_from_the_trainer_to_the_record() -> None:
    """result.json, the exit step and the record keep it; a record from before has none."""
    result = TrainerResult(TrainerOutcome.FAILED, "x", "RuntimeError", "m", cause=Cause.GPU)
    read = TrainerResult.from_json(json.loads(json.dumps(result.to_json())))
    assert read.cause is Cause.GPU
    step = next_step(ExitFacts(read.outcome, read.reason, "RuntimeError: m", cause=read.cause))
    assert step.termination is Termination.FAILED_TRAINING and step.cause is Cause.GPU
    record = RunRecord(name="r", spec_sha256="0", cause=step.cause)
    assert RunRecord.from_json(json.loads(json.dumps(record.to_json()))).cause is Cause.GPU
    older = {"name": "r", "spec_sha256": "0", "termination": "failed-training", "why": "NCCL"}
    assert RunRecord.from_json(older).cause is None
    with pytest.raises(ValueError, match="'sun-flare'"):
        RunRecord.from_json({**older, "cause": "sun-flare"})


def test_a_preflight_failure_is_the_machines_only_where_its_check_says_so() -> None:
    """The GPU checks type their machine failures; the batch rule, a spec mistake, does not."""
    gpu = failed("gpu", "train.device: 0 needs a GPU", "rent one", Cause.GPU)
    batch = _batch_rule(6, 4)
    assert batch is not None and batch.cause is None
    for first, cause in ((gpu, Cause.GPU), (batch, None)):
        sent = json.loads(json.dumps(PreflightReport("machine", [first]).to_json()))
        report = PreflightReport.from_json(sent)  # as it comes back from the checks' child
        assert report.cause is cause
    passed = CheckResult("disk", CheckStatus.PASS, "room")
    assert PreflightReport("machine", [passed]).cause is None


def test_a_failure_for_want_of_the_network_is_typed_where_found_not_read_from_words() -> None:
    """Only a check that typed its failure transient keeps a run from being marked terminal;
    a dataset's own words that happen to say "cannot reach" do not (issue 38)."""
    gone = failed("dataset", "the Hub has no dataset repo org/x", "fix dataset.hub.repo")
    words = failed("dataset", "data.yaml: val cannot reach outside its folder", "fix data.yaml")
    out = replace(failed("dataset", "cannot reach the Hub at h: refused", "check"), transient=True)
    assert PreflightReport("dataset", [gone]).permanent
    assert PreflightReport("dataset", [words]).permanent
    assert not PreflightReport("dataset", [out]).permanent
    sent = json.loads(json.dumps(PreflightReport("dataset", [out]).to_json()))
    assert not PreflightReport.from_json(sent).permanent


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU-less machine's answers")
def test_the_gpu_check_types_whether_any_machine_of_this_kind_can_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No GPU seen: no NVIDIA device at all or a CPU-only torch is the kind of machine (or
    install) the spec was given, and no fresh one like it passes; a driver that shows no GPU
    is this machine's own fault. The narrowest seam: the device node an NVIDIA driver makes."""
    wanted = TrainSpec("yolo9-t", 3, device="0")
    monkeypatch.setattr(gpu, "NVIDIA_DEVICE", tmp_path / "nvidiactl")
    check = gpu.select_gpus(wanted).check
    assert check.status is CheckStatus.FAIL and check.cause is Cause.MACHINE_KIND, check
    assert "no NVIDIA device" in check.message, check.message
    (tmp_path / "nvidiactl").touch()  # a driver that lost its GPUs: another machine may work
    assert gpu.select_gpus(wanted).check.cause is Cause.GPU
    monkeypatch.setattr(torch.version, "cuda", None)  # the install is wrong on every machine
    check = gpu.select_gpus(wanted).check
    assert check.cause is Cause.MACHINE_KIND and "a CPU-only build" in check.message, check
    assert "install a CUDA build of torch" in check.fix, check.fix


# A CUDA driver older than the one torch's CUDA runtime needs. The runtime (libcudart, which
# torch loads) dlopens libcuda.so.1 and asks cuDriverGetVersion (the driver API, cuda.h); too
# old, cudaGetDeviceCount answers cudaErrorInsufficientDriver, and torch's own device count
# (c10/cuda/CUDAFunctions.cpp, device_count_impl) warns "The NVIDIA driver on your system is
# too old (found version N)" and counts 0. A GPU cannot exist here; this driver library is the
# narrowest seam below torch and its runtime, which run for real.
OLD_DRIVER_C = "int cuDriverGetVersion(int *version) { *version = 11040; return 0; }\n"


def _old_driver(folder: Path) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the stand-in CUDA driver library")
    folder.mkdir()
    (folder / "driver.c").write_text(OLD_DRIVER_C)
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            "-o",
            str(folder / "libcuda.so.1"),
            str(folder / "driver.c"),
        ],
        check=True,
        capture_output=True,
    )
    return folder


def test_a_driver_too_old_for_torchs_cuda_fails_the_preflight_and_ends_an_engines_task(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    """PyPI's newest torch on an image whose driver is older than its CUDA: said as such with
    its fix, typed MACHINE_KIND, and so exit 2 under an engine, not 75 (every fresh machine of
    the image fails the same way). `runspec preflight`: under `runspec run` as root its child
    starts with its uids apart (runspec.secrets.apartuid), and the loader then ignores
    LD_LIBRARY_PATH, so the stand-in driver could not be put in its way."""
    driver = _old_driver(tmp_path / "driver")
    spec = write_spec("olddriver", train={"device": "0"})
    env = {**os.environ, "LD_LIBRARY_PATH": str(driver)}
    proc = subprocess.run(
        [*RUNSPEC, "preflight", str(spec), "--state", str(tmp_path / "state"), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = PreflightReport.from_json(json.loads(proc.stdout))
    check = next(c for c in report.checks if c.name == "gpu")
    assert check.status is CheckStatus.FAIL, proc.stdout
    assert "the NVIDIA driver supports CUDA up to 11.4" in check.message, check.message
    assert f"is built for CUDA {torch.version.cuda}" in check.message, check.message
    assert "download.pytorch.org/whl/cu" in check.fix and "an image whose driver" in check.fix
    assert report.cause is Cause.MACHINE_KIND
    record = RunRecord(
        name="olddriver",
        spec_sha256="0",
        termination=Termination.FAILED_PREFLIGHT,
        why=report.first_failure(),
        cause=report.cause,
    )
    assert engine_outcome(record, Safety(True, "nothing to push")) is Outcome.INVALID


@pytest.mark.parametrize(
    ("exc", "full"),
    [
        (OSError(errno.ENOSPC, "No space left on device", "last.pt"), True),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), True),
        (OSError(errno.EACCES, "Permission denied: No space left on device"), False),
        (RuntimeError("No space left on device, says a message"), False),
    ],
)
def test_the_trainer_types_a_full_disk_where_it_catches_the_error(
    exc: BaseException, full: bool
) -> None:
    """An OSError's errno decides, however deep in the chain LibreYOLO or torch wrapped it."""
    assert out_of_space(exc) is full
    try:
        try:
            raise exc
        except BaseException as inner:
            raise RuntimeError("checkpoint save failed") from inner
    except RuntimeError as outer:
        assert out_of_space(outer) is full


def test_a_full_disk_travels_typed_in_result_json_and_old_files_read_safely() -> None:
    full = TrainerResult(TrainerOutcome.FAILED, "No space left on device: x", no_space=True)
    read = TrainerResult.from_json(json.loads(json.dumps(full.to_json())))
    assert read.no_space is True
    step = next_step(ExitFacts(read.outcome, read.reason, no_space=read.no_space))
    assert step.step is Step.WAIT_FOR_SPACE
    # A result.json from before the field: its words are not read; the disk's room decides.
    older = {"outcome": "failed", "reason": "OSError: [Errno 28] No space left on device"}
    read = TrainerResult.from_json(older)
    assert read.no_space is False
    assert next_step(ExitFacts(read.outcome, read.reason)).step is Step.END
    facts = ExitFacts(read.outcome, read.reason, short_of_room=True)
    assert next_step(facts).step is Step.WAIT_FOR_SPACE
    assert TrainerResult.from_json({**older, "no_space": "yes"}).no_space is False


def test_a_workers_full_disk_known_only_by_its_line_is_typed_at_the_same_seam() -> None:
    """Under DDP the coordinator passes a worker's error on as its traceback's last line."""
    assert out_of_space_line("OSError", "[Errno 28] No space left on device: 'last.pt'")
    assert not out_of_space_line("OSError", "[Errno 13] Permission denied: 'last.pt'")
    assert not out_of_space_line("RuntimeError", "[Errno 28] No space left on device")
