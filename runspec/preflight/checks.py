"""The checks that need no GPU: versions, the push target, the dataset's size, the doctor."""

from __future__ import annotations

import importlib.metadata
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

from runspec.checkresult import CheckResult, failed, passed, warned
from runspec.dataset import safetar
from runspec.hubreach import endpoint_set
from runspec.preflight.datafound import dataset_missing
from runspec.push.targets import kind_of
from runspec.spec import modelnames as models
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths
from runspec.trainer.heavyimports import heavy_imports
from runspec.units import format_bytes

TESTED_LIBREYOLO = "1.6.0"
# Bounds the Hub calls the preflight makes (metadata, create_repo): a slow Hub is a failed
# check, not a stalled preflight.
HUB_TIMEOUT_S = 15.0


def version_checks() -> list[CheckResult]:
    results = [passed("python", f"Python {sys.version.split()[0]}")]
    try:
        with heavy_imports():
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
        with heavy_imports():
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

    return kind_of(spec.push).preflight(spec, paths)


def dataset_bytes(spec: Spec, data_root: Path) -> tuple[int, CheckResult | None]:
    """Bytes the dataset will still take on disk (0 when already there), and a note."""
    hub = spec.dataset.hub
    if hub is None:
        return 0, None  # a path is already here; a synthetic set is a few kilobytes
    key = f"{hub.repo}--{hub.file}"
    if safetar.is_extracted(data_root, key):
        return 0, None
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    endpoint = endpoint_set()
    url = hf_hub_url(
        hub.repo, hub.file, repo_type="dataset", revision=hub.revision, endpoint=endpoint
    )
    try:
        meta = get_hf_file_metadata(url, token=_hub_token(), timeout=HUB_TIMEOUT_S)
    except Exception as exc:  # what the Hub can say for sure fails; the rest leaves a guess
        missing = dataset_missing(hub, exc)
        if missing is not None:
            return 0, missing
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
    with heavy_imports():
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


WEIGHTS_TIMEOUT_S = 10.0


def weights_check(spec: Spec, paths: RunPaths) -> CheckResult:
    """The weights training starts from are there or can be fetched: found now, not after
    the dataset's download and an hour of set-up."""
    model = spec.train.model
    file = models.weights_file(model)
    if file is None:
        return _checkpoint_check(model, paths)
    if spec.train.args.get("pretrained", True) is False:
        return passed("weights", f"{model} trains from scratch: no weights to fetch")
    # The trainer runs in the weights cache; LibreYOLO keeps its downloads in weights/ there.
    local = paths.weights_cache / "weights" / file
    if local.is_file():
        return passed("weights", f"{file} is in {local.parent}")
    url, why = _download_url(model, file)
    if url is None:
        return failed("weights", f"{file} cannot be downloaded: {why}", _WEIGHTS_FIX.format(local))
    request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "runspec"})
    try:
        with urllib.request.urlopen(request, timeout=WEIGHTS_TIMEOUT_S) as resp:
            status = resp.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (OSError, ValueError) as exc:
        return failed(
            "weights",
            f"{file} is not in {local.parent} and {url} cannot be reached ({exc})",
            _WEIGHTS_FIX.format(local),
        )
    if status >= 400:
        return failed(
            "weights", f"{url} answers HTTP {status} for {file}", _WEIGHTS_FIX.format(local)
        )
    return passed("weights", f"{file} will be downloaded from {url}")


_WEIGHTS_FIX = "copy the weights file to {}, or set train.args.pretrained: false"


def _download_url(model: str, file: str) -> tuple[str | None, str]:
    with heavy_imports():  # the lookup imports every family LibreYOLO has (libreyolo.models)
        import libreyolo.models  # noqa: F401
        from libreyolo.cli import config

    why = config.weight_unavailable_reason(model)
    if why is not None:
        return None, why
    for cls in config._iter_model_classes():
        try:
            url = cls.get_download_url(file)
        except Exception:  # a family that does not own this file name says so by raising
            continue
        if url:
            return str(url), ""
    return None, f"LibreYOLO has no download route for {file}"


def _checkpoint_check(model: str, paths: RunPaths) -> CheckResult:
    if models.is_hub_model(model):
        return passed("weights", f"{model} is fetched from the Hub when training starts")
    path = Path(model).expanduser()
    where = path if path.is_absolute() else paths.weights_cache / path
    if where.is_file():
        return passed("weights", f"checkpoint {where} is here")
    return failed(
        "weights",
        f"checkpoint {model} is not on this machine (looked for {where})",
        "copy the checkpoint there, or name a model LibreYOLO knows (`libreyolo models`)",
    )
