"""The model card (`README.md` at the push target's root, which the Hub renders): what was
trained on what, how far it got and why it stopped, its best metrics, what it cost, which spec
made it, and how to load the weights with LibreYOLO.

Every value from the spec or the run's files goes through `_cell` or `_yaml`: a name or a
description cannot break the table, the front matter or the page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from runspec.clock import human_duration
from runspec.cost import usd_text
from runspec.printable import printable
from runspec.push.remote import CURVES, SPEC
from runspec.spec.model import Spec
from runspec.spec.provenance import public
from runspec.store.paths import RunPaths
from runspec.store.state import RunRecord
from runspec.trainer.observer import read_epochs
from runspec.views.epochline import metric_name
from runspec.views.report import push_target

SHOWN_METRICS = ("metrics/mAP50-95", "metrics/mAP50", "metrics/precision", "metrics/recall")
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")


def _cell(value: object) -> str:
    """A value for one table cell or one line: escaped, no pipes, no markup."""
    text = printable(str(value)).replace("|", "\\|")
    return re.sub(r"([\\`*_\[\]<>#])", r"\\\1", text) if not _PLAIN.match(text) else text


def _yaml(value: str) -> str:
    """A scalar for the front matter: bare when plain, else JSON-quoted (valid YAML)."""
    return value if _PLAIN.match(value) else json.dumps(printable(value))


def _dataset(spec: Spec) -> str:
    d = spec.dataset
    if d.hub is not None:
        rev = f"@{d.hub.revision}" if d.hub.revision else ""
        return f"{d.hub.repo}{rev} ({d.hub.file})"
    if d.synthetic is not None:
        s = d.synthetic
        return f"synthetic ({s.train} train, {s.val} val images, {s.classes} classes)"
    return f"a local data.yaml ({d.path})"


def _provenance(paths: RunPaths) -> str:
    try:
        prov: dict[str, Any] = json.loads(paths.provenance_file.read_text())
    except (OSError, ValueError):
        return "not recorded"
    prov = public(prov)  # what leaves the machine: never its folders, user or host
    git = prov.get("git")
    if isinstance(git, dict) and git.get("commit"):
        dirty = " (uncommitted changes)" if git.get("dirty") else ""
        remote = f" of {git['remote']}" if git.get("remote") else ""
        return f"{git.get('path')} at commit {str(git['commit'])[:12]}{remote}{dirty}"
    named = prov.get("file")  # the file's name: never the machine's folders
    return f"{prov.get('via', 'received')}" + (f" ({named})" if named else "")


def _metrics(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The best epoch's validation metrics, as LibreYOLO logged them."""
    if not rows:
        return []
    best_epoch = rows[-1].get("best_epoch")
    row = next((r for r in rows if r.get("epoch") == best_epoch), None)
    if row is None:
        return []
    found = [(metric_name(k), f"{row[k]:.4f}") for k in SHOWN_METRICS if k in row]
    return [("best epoch", str(best_epoch)), *found]


def _load(spec: Spec, paths: RunPaths) -> list[str]:
    push = spec.push
    if push is not None and push.hub is not None:
        ref = f"hf://{push.hub.repo}/weights/best.pt"
        login = " (a private repo: `hf auth login` first)" if push.hub.private else ""
        return [
            f"With LibreYOLO (`pip install 'libreyolo[hf]'`){login}:",
            "",
            "```python",
            "from libreyolo import LibreYOLO",
            "",
            f'model = LibreYOLO("{ref}")  # or weights/last.pt, weights/epoch_N.pt',
            'results = model.predict("image.jpg")',
            "```",
        ]
    where = push_target(spec, paths).removeprefix("dir ")
    return [
        "With LibreYOLO:",
        "",
        "```python",
        "from libreyolo import LibreYOLO",
        "",
        f'model = LibreYOLO("{printable(where)}/weights/best.pt")',
        'results = model.predict("image.jpg")',
        "```",
    ]


def _image_size(spec: Spec, paths: RunPaths) -> str:
    """The size LibreYOLO trained at, as its train_config.yaml resolved it (a model may round
    the spec's size to its stride); the spec's own when the file says nothing."""
    asked = spec.train.imgsz
    try:
        config = yaml.safe_load((paths.run_dir / "train_config.yaml").read_text()[:1_000_000])
    except (OSError, yaml.YAMLError):
        config = None
    trained = config.get("imgsz") if isinstance(config, dict) else None
    if not isinstance(trained, int | list) or isinstance(trained, bool):
        return str(asked)
    trained = trained if isinstance(trained, int) else tuple(trained)
    if trained == asked:
        return str(trained)
    return f"{trained} (the spec asked {asked})"


def _schedule(record: RunRecord) -> list[tuple[str, str]]:
    fit = record.fit
    if fit is None or not fit.fitted:
        return []
    return [("schedule", f"{fit.line()} (budget.fit)")]


def _ended(record: RunRecord) -> tuple[str, str]:
    """How it ended; a live run's card (the first one, after its first push) says it has not."""
    if record.termination is None:
        return ("state", f"{record.status.value}: under way, this card is replaced when it ends")
    term = record.termination.value
    return ("ended", f"{term}: {record.why}" if record.why else term)


def model_card(
    spec: Spec,
    paths: RunPaths,
    record: RunRecord,
    cost_usd: float | None,
    curves: bool,
    plots: list[str],
) -> str:
    """The card's text. `curves`: the curves PNG goes out beside it; `plots`: LibreYOLO's
    validation plots that go out too (paths relative to the run folder)."""
    rows = read_epochs(paths.run_dir)
    tags = ["libreyolo", "object-detection", "runspec"]
    front = ["---", "library_name: libreyolo", "pipeline_tag: object-detection", "tags:"]
    front += [f"- {t}" for t in tags]
    if spec.dataset.hub is not None:
        front += ["datasets:", f"- {_yaml(spec.dataset.hub.repo)}"]
    front.append("---")
    budget = f"{human_duration(spec.budget.wall_clock)} wall clock"
    if cost_usd is not None and spec.budget.hourly_cost is not None:
        so_far = "" if record.termination else " so far"
        budget += f"; this run cost {usd_text(cost_usd, spec.budget.hourly_cost)}{so_far}"
    table = [
        ("model", spec.train.model),
        ("dataset", _dataset(spec)),
        ("epochs", f"{record.epoch} of {record.total_epochs}"),
        *_schedule(record),
        _ended(record),
        ("image size", _image_size(spec, paths)),
        ("budget", budget),
        ("spec", f"{SPEC} ({spec.sha256[:12]}), from {_provenance(paths)}"),
        *_metrics(rows),
    ]
    body = ["", f"# {_cell(spec.name)}", ""]
    if spec.description:
        body += [_cell(spec.description), ""]
    body += [
        "Trained with [LibreYOLO](https://github.com/LibreYOLO/libreyolo) on a rented machine "
        f"by runspec ([its spec]({SPEC})), which pushed and verified these files.",
        "",
        "| | |",
        "| --- | --- |",
        *[f"| {key} | {_cell(value)} |" for key, value in table],
        "",
    ]
    if curves:
        body += ["## Training curves", "", f"![training curves]({CURVES})", ""]
    if plots:
        body += ["## Validation plots (LibreYOLO, last validation)", ""]
        body += [f"![{_cell(Path(p).stem)}]({p})" for p in plots] + [""]
    body += ["## Use the weights", "", *_load(spec, paths), ""]
    return "\n".join(front + body)
