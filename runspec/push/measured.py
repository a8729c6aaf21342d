"""Epoch times measured by earlier runs, from their receipts at the Hub: what `runspec plan
--hub ORG` plans a new spec's epochs with, before anyone pays.

Each run repo of the org (the `runspec` tag) that finished leaves `runspec/receipt.json` with
the model, image size, batch and GPU it trained and the last epoch's seconds
(runspec.push.receipt). They are read through the one capped, strict reader of Hub files, the
listing within a total time; a receipt that is not what runspec writes is skipped.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import Any

from runspec.errors import RunspecError
from runspec.hubreach import endpoint_set
from runspec.hubread import HubReadError, file_json, within
from runspec.push.base import one_line
from runspec.push.remote import RECEIPT
from runspec.spec.model import Spec

LIST_S = 60.0
MAX_REPOS = 500
TAG = "runspec"


@dataclass(frozen=True)
class Measured:
    repo: str
    model: str
    imgsz: Any
    batch: int
    gpu: str | None
    epoch_s: float


def _one(repo: str, receipt: Any) -> Measured | None:
    training = receipt.get("training") if isinstance(receipt, dict) else None
    if not isinstance(training, dict):
        return None
    model, batch, seconds = (
        training.get("model"),
        training.get("batch"),
        training.get("epoch_seconds"),
    )
    gpu = training.get("gpu")
    if not isinstance(model, str) or not isinstance(batch, int) or isinstance(batch, bool):
        return None
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        return None
    if not math.isfinite(seconds) or not 0 < seconds < 30 * 86400:
        return None
    imgsz = training.get("imgsz")
    imgsz = tuple(imgsz) if isinstance(imgsz, list) else imgsz
    return Measured(repo, model, imgsz, batch, gpu if isinstance(gpu, str) else None, seconds)


def measured(org: str) -> list[Measured]:
    """Every readable receipt's epoch time among `org`'s runs."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint_set())
    try:
        listing = partial(api.list_models, author=org, filter=TAG, expand=["sha"])
        models = within(LIST_S, f"listing {org}", lambda: list(islice(listing(), MAX_REPOS)))
    except Exception as exc:  # the network's or the Hub's: said in one line
        raise RunspecError(f"cannot list {org}'s runs on the Hub: {one_line(exc)}") from exc
    found = []
    for model in models:
        try:
            receipt = file_json(model.id, RECEIPT, str(model.sha or ""))
        except HubReadError:
            continue  # one unreadable repo is no reason to plan without the others
        if (one := _one(model.id, receipt)) is not None:
            found.append(one)
    return found


def epoch_time(spec: Spec, runs: list[Measured]) -> tuple[float, list[str]] | None:
    """The median epoch of the runs that trained the same model, image size and batch (and
    the same GPU, where the spec names one); None when none did."""
    imgsz = spec.train.imgsz
    same = [
        r
        for r in runs
        if r.model.lower() == spec.train.model.lower()
        and r.imgsz == imgsz
        and r.batch == spec.train.batch
    ]
    gpu = spec.resources.gpu_name
    if gpu is not None:
        same = [r for r in same if r.gpu is not None and gpu.lower() in r.gpu.lower()]
    if not same:
        return None
    return statistics.median(r.epoch_s for r in same), [r.repo for r in same]
