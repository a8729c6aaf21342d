"""The receipt: `runspec/receipt.json` at the push target, in the commit after the final weights
verified, so one chain a person can audit from the repository joins the spec's commit, the
weights, the budget, the bill and the end of the machine.

It holds where the spec came from (remote, commit, path, blob sha, dirty), the versions that
trained (runspec, LibreYOLO, torch and its CUDA build), the dataset's repo and the revision the
Hub resolved, each final weight's sha256 as the final push verified it (and whether that was a
read-back of the bytes), the budget (its start, deadline, what was used), the billed time and
its cost at the provider's increment (runspec.billing), and the finish about to be applied:
the action the spec asks, on which provider and instance. Like the card, it never holds a
secret, a user or a host name, and a receipt the target refuses is said and never fails the
weights it describes.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runspec.billing import INCREMENTS, bill
from runspec.clock import parse_utc_iso, utc_iso
from runspec.dataset.staging import hf_home_for, hub_cache_dir
from runspec.providers.base import ProviderError
from runspec.providers.detect import get_provider
from runspec.push.base import PushTarget
from runspec.push.cardpush import push_one
from runspec.push.manifest import Manifest, digest_file
from runspec.push.remote import RECEIPT
from runspec.spec.model import FinishAction, Spec
from runspec.spec.provenance import public
from runspec.store.atomic import write_text
from runspec.store.paths import RunPaths
from runspec.store.state import RunRecord
from runspec.trainer.control import read_epoch_marker
from runspec.voice import warning

RECEIPT_SCHEMA = 1
RECEIPT_TIME_S = 5.0  # a few hundred bytes: one commit and one read
_GIT_KEYS = ("remote", "branch", "commit", "path", "blob", "dirty", "author", "subject")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    """What trained, read from the installed distributions (no import of torch here: the
    daemon stays light). torch's local version names its CUDA build (`2.4.1+cu121`)."""
    torch = _version("torch")
    cuda = torch.split("+", 1)[1] if torch and "+" in torch else None
    for dist in ("nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12"):
        cuda = cuda or (f"cuda-runtime {found}" if (found := _version(dist)) else None)
    return {
        "runspec": _version("runspec"),
        "libreyolo": _version("libreyolo"),
        "torch": torch,
        "cuda": cuda,
    }


def dataset(spec: Spec) -> dict[str, Any] | None:
    """The dataset's repo and the commit the Hub resolved its revision to (from the cache's
    refs, as huggingface_hub wrote them when it downloaded the tar)."""
    hub = spec.dataset.hub
    if hub is None:
        return None
    asked = hub.revision or "main"
    resolved: str | None = asked if len(asked) == 40 else None
    folder = hub_cache_dir(hf_home_for(spec)) / ("datasets--" + hub.repo.replace("/", "--"))
    try:
        text = (folder / "refs" / asked).read_text().strip()
        resolved = text if len(text) == 40 else resolved
    except (OSError, ValueError):
        pass
    return {"repo": hub.repo, "file": hub.file, "revision": asked, "resolved": resolved}


def source(paths: RunPaths) -> dict[str, Any]:
    """Where the spec came from: its git facts (a followed branch or a submit from a checkout),
    never the submitting machine's paths, user or host."""
    try:
        provenance = json.loads(paths.provenance_file.read_text())
    except (OSError, ValueError):
        provenance = {}
    shown = public(provenance) if isinstance(provenance, dict) else {}
    git = shown.get("git")  # a remote that is a folder of the submitting machine stays here
    out: dict[str, Any] = {"via": provenance.get("via", "inbox") if provenance else "inbox"}
    if isinstance(git, dict):
        out.update({k: git[k] for k in _GIT_KEYS if k in git})
    if "file" in shown:
        out["file"] = shown["file"]
    return out


def gpu_name() -> str | None:
    """The first card's name as nvidia-smi says it (None without one): what a later plan
    matches a measured epoch by."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.stdout.strip().splitlines()[:1]
    return first[0].strip()[:100] if out.returncode == 0 and first else None


def training(spec: Spec, paths: RunPaths) -> dict[str, Any]:
    """What trained and how long an epoch took: `runspec plan --hub` reads it back to say how
    many epochs a new spec of the same model, size, batch and GPU will fit."""
    marker = read_epoch_marker(paths.control_dir)
    return {
        "model": spec.train.model,
        "imgsz": list(spec.train.imgsz)
        if isinstance(spec.train.imgsz, tuple)
        else spec.train.imgsz,
        "batch": spec.train.batch,
        "device": spec.train.device,
        "gpu": gpu_name(),
        "epoch_seconds": marker.epoch_seconds if marker is not None else None,
    }


def build(
    spec: Spec,
    paths: RunPaths,
    record: RunRecord,
    pushed: Manifest,
    now: float,
    where: tuple[str | None, str | None],
) -> dict[str, Any]:
    """The receipt of a run whose final push `pushed` verified; `where`: (provider, instance)."""
    start = record.budget_started_at or record.started_at
    used = max(0.0, now - parse_utc_iso(start)) if start else None
    provider, instance = where
    billed: dict[str, Any] | None = None
    if used is not None and provider in INCREMENTS:
        billed = bill(provider, used, 0.0, spec.budget.hourly_cost).to_json()
    elif used is not None and spec.budget.hourly_cost is not None:
        billed = {
            "provider": provider,
            "used_seconds": used,
            "usd": round(spec.budget.hourly_cost * used / 3600, 4),
        }
    weights = [e for e in pushed.entries if e.path.startswith("weights/")]
    return {
        "schema": RECEIPT_SCHEMA,
        "run": spec.name,
        "spec_sha256": record.spec_sha256,
        "source": source(paths),
        "versions": versions(),
        "dataset": dataset(spec),
        "weights": [
            {"path": e.path, "sha256": e.sha256, "size": e.size, "epoch": e.epoch} for e in weights
        ],
        "read_back": pushed.read_back,
        "training": training(spec, paths),
        "epoch": pushed.epoch,
        "budget": {
            "started_at": start,
            "deadline": record.deadline,
            "used_seconds": used,
            "wall_clock_seconds": spec.budget.wall_clock,
            "overrun_seconds": spec.budget.overrun,
        },
        "billed": billed,
        "finish": {
            "action": spec.finish.action.value,
            "provider": provider,
            "instance": instance,
            "unverified": spec.finish.unverified.value,
        },
        "written_at": utc_iso(now),
    }


def where(spec: Spec) -> tuple[str | None, str | None]:
    """(provider, instance) the finish would address; the spec's named provider without an
    instance when it ends nothing or the box cannot tell (a detection is a few metadata reads,
    each bounded)."""
    named = None if spec.finish.provider == "auto" else spec.finish.provider
    if spec.finish.action not in (FinishAction.STOP, FinishAction.DESTROY, FinishAction.AUTO):
        return named, None
    try:
        provider, _how = get_provider(spec.finish.provider, timeout=5.0)
        return provider.name, provider.identify()
    except ProviderError:
        return named, None


def send_receipt(
    spec: Spec,
    paths: RunPaths,
    record: RunRecord,
    target: PushTarget,
    say: Callable[[str], None],
    time_left: float,
    now: float,
) -> bool:
    """After a verified final push: build the receipt from what that push verified, push it."""
    pushed = Manifest.load(paths.pushed_manifest)
    if pushed is None or not pushed.final:
        return False
    receipt = build(spec, paths, record, pushed, now, where(spec))
    return push_receipt(target, receipt, paths, say, time_left)


def push_receipt(
    target: PushTarget,
    receipt: dict[str, Any],
    paths: RunPaths,
    say: Callable[[str], None],
    time_left: float,
) -> bool:
    """Push and verify the receipt; a failure is said and returned, never raised."""
    if time_left < RECEIPT_TIME_S:
        say(warning("no receipt: the budget's overrun is spent, and the finish goes first"))
        return False
    local: Path = paths.receipt_file
    write_text(local, json.dumps(receipt, indent=2) + "\n")
    problems = push_one(target, local, RECEIPT, digest_file(local), "runspec: receipt")
    if problems:
        say(warning(f"the receipt was NOT pushed ({problems[0]}); the weights stand verified"))
        return False
    say(f"receipt pushed to {target.description} ({RECEIPT})")
    return True
