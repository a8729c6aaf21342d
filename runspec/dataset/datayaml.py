"""A staged dataset's data.yaml cannot reach outside its folder.

LibreYOLO reads the data.yaml a dataset brings: `path:` is the dataset's root, the splits and
`annotations:` are read (and label caches written beside them) under it, and a `download:`
URL is fetched and unzipped into `path:` when the splits are missing. A hostile or careless
data.yaml could point all of that anywhere: write or delete outside the run, or plant code in a
folder on a later trainer's import path. So before training (in `runspec run`, the daemon and
the preflight) `path:`, every split and every annotation file must resolve, links followed,
inside the folder that holds the data.yaml, and `download:` is refused unless the spec opts in
with `train.args.allow_download_scripts: true` (then it lands inside that folder, `path:` being
held there). The trainer gets LIBREYOLO_DATASETS_DIR set to the same folder, so that a relative
`path:` means the same to LibreYOLO as it does here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from runspec.checkresult import failed, passed
from runspec.errors import RunspecError
from runspec.spec.yamlload import MAX_BYTES

if TYPE_CHECKING:
    from runspec.checkresult import CheckResult

SPLITS = ("train", "val", "test")
OPT_IN = "allow_download_scripts"


class DatasetEscape(RunspecError):
    """The data.yaml names something outside its dataset's folder."""


def _inside(candidate: str, root: Path, folder: Path) -> Path | None:
    """`candidate` (relative to `root`) resolved, links followed, if it lies in `folder`."""
    path = Path(os.path.realpath(root / os.path.expanduser(candidate)))
    return path if path == folder or path.is_relative_to(folder) else None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value]
    return [] if value is None else [str(value)]


def check_data_yaml(data_yaml: Path, *, allow_download: bool = False) -> None:
    """Raise DatasetEscape (saying which key and what to do) when the data.yaml names a path
    outside its folder, or a download the spec did not opt in to."""
    folder = Path(os.path.realpath(data_yaml.parent))
    try:
        with data_yaml.open("rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
        config = yaml.safe_load(raw) if len(raw) <= MAX_BYTES else None
    except (OSError, yaml.YAMLError) as exc:
        raise DatasetEscape(f"cannot read the dataset's {data_yaml}: {exc}") from exc
    if not isinstance(config, dict):
        raise DatasetEscape(f"the dataset's {data_yaml} is not a YAML mapping under 1 MiB")
    where = f"the dataset's {data_yaml.name} ({data_yaml})"
    root = folder
    if config.get("path") not in (None, ""):
        found = _inside(str(config["path"]), folder, folder)
        if found is None:
            raise DatasetEscape(
                f"{where} sets path: {config['path']!r}, outside its folder {folder}: a "
                "dataset may only read and write its own folder; remove path: or make it '.'"
            )
        root = found
    named = [(split, v) for split in SPLITS for v in _strings(config.get(split))]
    notes = config.get("annotations")
    if isinstance(notes, dict):
        named += [(f"annotations.{k}", v) for k, v in notes.items() for v in _strings(v)]
    for key, value in named:
        if _inside(value, root, folder) is None:
            raise DatasetEscape(
                f"{where} sets {key}: {value!r}, outside its folder {folder}: keep every split "
                "inside the dataset's folder (relative to it)"
            )
    if config.get("download") and not allow_download:
        raise DatasetEscape(
            f"{where} has a download: entry, which LibreYOLO would fetch and unpack: runspec "
            f"refuses it unless the spec sets train.args.{OPT_IN}: true (then it lands inside "
            f"{folder} only); or stage the whole dataset in the tar"
        )


def allows_download(args: Any) -> bool:
    """The spec's explicit opt-in, from its train.args."""
    return bool(args.get(OPT_IN, False)) if hasattr(args, "get") else False


def data_yaml_check(data_yaml: Path, args: Any) -> CheckResult:
    """The preflight's check of the same rule, before the doctor or the profiler read it."""
    try:
        check_data_yaml(data_yaml, allow_download=allows_download(args))
    except DatasetEscape as exc:
        return failed("data.yaml", str(exc), "fix the dataset's data.yaml, then stage it again")
    return passed("data.yaml", f"{data_yaml} keeps to its folder")
