"""The model names `train.model` may use, as LibreYOLO knows them, checked without LibreYOLO.

Validating a spec must not import LibreYOLO (seconds and most of a gigabyte), so the names live
in a table shipped with runspec (`runspec/data/libreyolo-models.json`: CLI name -> weights
file). `tests/test_spec_models.py` compares it with the installed LibreYOLO, so it cannot drift
silently; after an upgrade, `python -m runspec.spec.modelnames` writes it again.

A model may also be a checkpoint: a path, or a file name other than LibreYOLO's own (`best.pt`),
which the preflight then looks for on the machine.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit

TABLE = Path(__file__).resolve().parent.parent / "data" / "libreyolo-models.json"
WEIGHT_SUFFIXES = (".pt", ".pth", ".safetensors", ".onnx", ".engine", ".torchscript")
_HUB_HOST = "huggingface.co"
_REPO_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_FILE_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,8}$")
# Ultralytics' weight names (yolov8n.pt, yolov9s.pt, yolo11n-seg.pt, yolov5su.pt): the names a
# YOLO user types first, and no file on this machine.
_ULTRALYTICS = re.compile(r"^yolov?(\d+)([a-z]?)[a-z]?(-[a-z0-9]+)?\.pt$", re.IGNORECASE)


@cache
def names() -> dict[str, str]:
    loaded: dict[str, str] = json.loads(TABLE.read_text(encoding="utf-8"))["names"]
    return loaded


def weights_file(model: str) -> str | None:
    """The weights file LibreYOLO downloads for a model name (None for a checkpoint path)."""
    table = names()
    if model.lower() in table:
        return table[model.lower()]
    files = {f.lower(): f for f in table.values()}
    return files.get(model.lower())


def is_checkpoint_ref(model: str) -> bool:
    """A path, a Hub reference, or a file name LibreYOLO does not name itself."""
    if "/" in model or model.startswith(("~", ".")):
        return True
    lower = model.lower()
    return lower.endswith(WEIGHT_SUFFIXES) and not lower.startswith("libre")


def _hub_hosts() -> set[str]:
    hosts = {_HUB_HOST}
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT") or "").hostname
    if endpoint:
        hosts.add(endpoint)
    return hosts


def is_hub_model(ref: object) -> bool:
    """Is this model reference fetched from a Hub repo (so a private one needs the token, and
    a spec's folder never makes it a path)?

    As LibreYOLO reads them: `hf://owner/repo[@rev][/file]`; a bare `owner/repo` (one slash,
    no file suffix, nothing that reads as a local path); or a URL on the Hub's host. A
    LibreYOLO weight name (`yolo9-t`, `LibreYOLO9s.pt`) downloads public weights: no token.
    """
    if not isinstance(ref, str) or not ref:
        return False
    if ref.startswith("hf://"):
        return True
    if ref.startswith(("http://", "https://")):
        host = urlsplit(ref).hostname or ""
        return any(host == h or host.endswith("." + h) for h in _hub_hosts())
    parts = ref.split("/")
    if len(parts) != 2 or ref.startswith((".", "~")) or ":" in ref or "\\" in ref:
        return False
    return all(_REPO_PART.match(part) for part in parts) and not _FILE_SUFFIX.search(ref)


def is_local_path(model: str) -> bool:
    """A checkpoint on the machine's disk: not LibreYOLO's own name, not a Hub reference, not
    a URL. Relative ones mean the spec's folder (runspec.spec.specbase)."""
    return weights_file(model) is None and not is_hub_model(model) and "://" not in model


def _ultralytics(model: str) -> str | None:
    """Why an Ultralytics weights name is none of LibreYOLO's, with LibreYOLO's name for the
    same model where it has one; None for any other name."""
    found = _ULTRALYTICS.match(model)
    if found is None:
        return None
    version, size = found.group(1), found.group(2).lower()
    same = f"yolo{version}-{size}"
    hint = f"did you mean {same!r}? " if size and same in names() else ""
    return (
        f"{model!r} is an Ultralytics weights name, not a LibreYOLO one; {hint}`libreyolo "
        f"models` lists LibreYOLO's (yolo9-t, LibreYOLO9s.pt, ...); a checkpoint file of that "
        f"name is given as a path (./{model})"
    )


def problem(model: str) -> str | None:
    """Why `model` is no model LibreYOLO can train, with a did-you-mean; None when it is."""
    if weights_file(model) is None and (foreign := _ultralytics(model)) is not None:
        return foreign
    if weights_file(model) is not None or is_checkpoint_ref(model):
        return None
    table = names()
    candidates = [*table, *table.values()]
    close = difflib.get_close_matches(model.lower(), [c.lower() for c in candidates], n=1)
    shown = {c.lower(): c for c in candidates}
    hint = f"did you mean {shown[close[0]]!r}? " if close else ""
    return (
        f"{model!r} is not a model LibreYOLO knows; {hint}`libreyolo models` lists them "
        "(yolo9-t, LibreYOLO9s.pt, ...), or give the path of a checkpoint"
    )


def generate() -> dict[str, object]:
    """The table from the installed LibreYOLO (imports it)."""
    import importlib.metadata

    from libreyolo.cli import config

    config._build_name_map()
    return {
        "libreyolo": importlib.metadata.version("libreyolo"),
        "names": dict(sorted(config._CLI_NAME_TO_WEIGHTS.items())),
    }


if __name__ == "__main__":
    TABLE.write_text(json.dumps(generate(), indent=1, sort_keys=False) + "\n", encoding="utf-8")
    sys.stdout.write(f"wrote {TABLE}\n")
