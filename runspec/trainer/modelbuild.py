"""Building the model a job trains: the one place both the trainer and the preflight's profiler
make it, so neither imports the other. Imports torch and LibreYOLO: child programs only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import libreyolo
import torch
from libreyolo.cli.commands.train import _create_explicit_task_train_model
from libreyolo.cli.config import detect_family_from_model_ref, resolve_model_name

from runspec.trainer.control import TrainJob


def resolve_device(device: str) -> str:
    """The spec's device as LibreYOLO takes it; "all" means every GPU this machine shows."""
    if device != "all":
        return device
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return ",".join(str(i) for i in range(count)) if count else "cpu"


def weights_ref(ref: str, cache: Path) -> str:
    """A model reference with the weights cache for LibreYOLO's working directory: the trainer
    works in its run folder, where LibreYOLO would otherwise look for (and download) a bare
    `LibreYOLO9t.pt` under weights/, beside the run's own checkpoints. A Hub reference and an
    absolute path stay as they are."""
    if ref.startswith("hf://") or (ref.count("/") == 1 and "." not in ref):
        return ref
    path = Path(resolve_model_name(ref)).expanduser()
    if path.is_absolute():
        return str(path)
    if len(path.parts) == 1 and not ref.startswith("."):
        # As LibreYOLO's own _resolve_weights_path: weights/NAME, unless only NAME is there.
        bare = cache / path
        return str(
            bare
            if bare.exists() and not (cache / "weights" / path).exists()
            else cache / "weights" / path
        )
    return str(cache / path)


def model_path(job: TrainJob) -> str:
    """The weights the job starts from, resolved against its weights cache."""
    return weights_ref(job.model, Path(job.weights_cache))


def build_model(job: TrainJob, device: str, pretrained: Any) -> Any:
    if job.resume_from is not None:
        return libreyolo.LibreYOLO(job.resume_from, device=_model_device(device))
    model_path_ = model_path(job)
    if pretrained is False:
        # As `libreyolo train model=yolo9-t pretrained=false` does: build the architecture
        # from scratch, with no download.
        family = detect_family_from_model_ref(job.model, model_path_)
        model = _create_explicit_task_train_model(
            family=family,
            model_path=model_path_,
            task=job.args.get("task"),
            resume=False,
            device=_model_device(device),
            pretrained=False,
            seed=int(job.args.get("seed", 0)),
        )
        if model is not None:
            return model
    return libreyolo.LibreYOLO(model_path_, device=_model_device(device))


def _model_device(device: str) -> str:
    return "cpu" if device == "cpu" else "cuda:" + device.split(",", maxsplit=1)[0]
