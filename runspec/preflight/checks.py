"""The checks that need no GPU: versions, the push target, the dataset's size, the doctor."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path

from runspec import safetar
from runspec.model import Spec
from runspec.paths import RunPaths
from runspec.preflight.report import CheckResult, failed, passed, warned
from runspec.units import format_bytes

TESTED_LIBREYOLO = "1.6.0"
# Bounds the Hub calls the preflight makes (metadata, create_repo): a slow Hub is a failed
# check, not a stalled preflight.
HUB_TIMEOUT_S = 15.0


def version_checks() -> list[CheckResult]:
    results = [passed("python", f"Python {sys.version.split()[0]}")]
    try:
        import torch
    except ImportError as exc:
        results.append(
            failed("torch", f"torch cannot be imported: {exc}", "install torch for this GPU first")
        )
        return results
    cuda = torch.version.cuda
    results.append(
        passed("torch", f"torch {torch.__version__} ({'CUDA ' + cuda if cuda else 'CPU-only'})")
    )
    try:
        import torchvision
        from torchvision.ops import nms

        # A torchvision built for another torch imports fine and fails at its first operator;
        # LibreYOLO's validation calls this one.
        nms(torch.zeros((1, 4)), torch.zeros(1), 0.5)
        results.append(passed("torchvision", f"torchvision {torchvision.__version__}, nms works"))
    except (ImportError, RuntimeError) as exc:
        results.append(
            failed(
                "torchvision",
                f"torchvision is unusable: {str(exc).splitlines()[0]}",
                "install the torchvision release built for this torch",
            )
        )
    try:
        version = importlib.metadata.version("libreyolo")
    except importlib.metadata.PackageNotFoundError:
        results.append(failed("libreyolo", "libreyolo is not installed", "pip install libreyolo"))
        return results
    if version != TESTED_LIBREYOLO:
        results.append(
            warned(
                "libreyolo",
                f"libreyolo {version}; runspec is tested with {TESTED_LIBREYOLO}",
                f"pip install libreyolo=={TESTED_LIBREYOLO} if training misbehaves",
            )
        )
    else:
        results.append(passed("libreyolo", f"libreyolo {version}"))
    return results


def _hub_token() -> str | None:
    from huggingface_hub import get_token

    return os.environ.get("HF_TOKEN") or get_token()


def push_check(spec: Spec, paths: RunPaths) -> CheckResult:
    """The push target's own check (each target knows what it needs), changing nothing."""
    if spec.push is None:
        return passed("push", "no push target: the weights stay on this machine")
    from runspec.push import PushTarget  # registers every target class

    return PushTarget.kind_of(spec.push).preflight(spec, paths)


def dataset_bytes(spec: Spec, data_root: Path) -> tuple[int, CheckResult | None]:
    """Bytes the dataset will still take on disk (0 when already there), and a note."""
    hub = spec.dataset.hub
    if hub is None:
        return 0, None  # a path is already here; a synthetic set is a few kilobytes
    key = f"{hub.repo}--{hub.file}"
    if safetar.is_extracted(data_root, key):
        return 0, None
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    endpoint = os.environ.get("HF_ENDPOINT") or None
    url = hf_hub_url(
        hub.repo, hub.file, repo_type="dataset", revision=hub.revision, endpoint=endpoint
    )
    try:
        meta = get_hf_file_metadata(url, token=_hub_token(), timeout=HUB_TIMEOUT_S)
    except Exception as exc:  # any failure only makes the estimate unknown; staging reports it
        return 0, warned(
            "dataset size",
            f"could not ask the Hub the size of {hub.repo}/{hub.file}: {type(exc).__name__}",
            "check dataset.hub and HF_TOKEN; the disk check counts checkpoints only",
        )
    size = meta.size or 0
    # The tar stays in the Hub cache and its contents are extracted beside it.
    return 2 * size, passed("dataset size", f"{hub.file} is {format_bytes(size)} on the Hub")


def doctor_check(data_yaml: Path, imgsz: int) -> CheckResult:
    if not data_yaml.is_file():
        return warned(
            "doctor",
            f"the dataset is not staged yet ({data_yaml} missing): not checked",
            "the run checks it after staging; `runspec preflight` after a first stage checks it",
        )
    from libreyolo import doctor
    from libreyolo.doctor.config import DoctorError

    try:
        report = doctor.diagnose(str(data_yaml), imgsz=imgsz, progress=False)
    except DoctorError as exc:
        return failed(
            "doctor", f"libreyolo doctor could not scan {data_yaml}: {exc}", "fix the data.yaml"
        )
    errors, warnings = report.errors, report.warnings
    if errors:
        shown = "; ".join(f"{f.check_id}: {f.message}" for f in errors[:3])
        more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
        return failed(
            "doctor",
            f"{len(errors)} dataset error(s): {shown}{more}",
            f"run `libreyolo doctor {data_yaml}` and fix the dataset",
        )
    if warnings:
        shown = "; ".join(f"{f.check_id}: {f.message}" for f in warnings[:3])
        return warned(
            "doctor",
            f"{len(warnings)} dataset warning(s): {shown}",
            f"see `libreyolo doctor {data_yaml}`; training can go ahead",
        )
    return passed("doctor", f"libreyolo doctor: no errors or warnings in {data_yaml}")
