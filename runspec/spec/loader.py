"""Spec file -> frozen `Spec`, or every problem in it, each at its line and column.

Steps: YAML (runspec.spec.yamlload), `train.args` keys normalised, JSON Schema (every error,
worded and located by runspec.spec.schema_errors), the rules beyond the schema (runspec.spec.rules),
then the typed Spec with defaults applied.

A spec the daemon accepted is read back with `load_accepted`: built, never judged again, so a
runspec upgrade that tightens a rule leaves the runs it already accepted as they were.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from jsonschema import Draft202012Validator

from runspec.errors import Problem, RunspecError, SpecInvalid, UsageError
from runspec.spec import rules
from runspec.spec.model import (
    DEFAULT_PUSH_FILES,
    BudgetFit,
    BudgetSpec,
    DatasetSpec,
    FinishAction,
    FinishSpec,
    HubDataset,
    HubTarget,
    OutputSpec,
    PreflightSpec,
    PushSpec,
    Spec,
    StorageSpec,
    SyntheticDataset,
    TrainSpec,
    Unverified,
    WatchSpec,
)
from runspec.spec.resources import build_resources
from runspec.spec.schema_errors import Reporter, explain
from runspec.spec.specbase import accepted_base, rebase
from runspec.spec.specread import NotRegularFile, SpecTooBig, read_spec
from runspec.spec.yamlload import YamlDocument, json_pointer, load_yaml, too_big
from runspec.units import parse_duration, parse_size

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema" / "runspec.schema.json"


@cache
def schema() -> dict[str, Any]:
    with SCHEMA_PATH.open(encoding="utf-8") as f:
        loaded: dict[str, Any] = json.load(f)
    return loaded


@cache
def _validator() -> Any:
    # Compiled once per process; the schema is checked against the metaschema by the tests,
    # not on every start.
    return Draft202012Validator(schema())


def _problems(
    doc: YamlDocument, source: str, yaml_problems: list[Problem], state: Path | None
) -> list[Problem]:
    data = doc.data
    spelled: dict[str, str] = {}
    findings: list[rules.Finding] = []
    train = data.get("train")
    if isinstance(train, dict) and isinstance(train.get("args"), dict):
        train["args"], spelled, findings = rules.normalise_args(train["args"])
    report = Reporter(doc, source, spelled)
    report.problems.extend(yaml_problems)
    for error in _validator().iter_errors(data):
        explain(error, report)
    # A value the YAML layer already refused (an unsupported tag) is not judged again.
    refused = {p.pointer for p in yaml_problems}
    for finding in [*findings, *rules.check_rules(data, state)]:
        if json_pointer(finding.path) not in refused:
            report.add(finding.path, finding.message, at_key=finding.at_key)
    found = sorted(report.problems, key=lambda p: (p.line, p.column, p.pointer, p.message))
    if report.dropped:
        last = found[-1]
        found.append(
            Problem(
                source,
                last.line,
                last.column,
                "",
                f"and {report.dropped} more problems (the first {len(found)} are shown)",
            )
        )
    return found


def _path(value: str | None) -> Path | None:
    return None if value is None else Path(value)


def _build_train(t: dict[str, Any]) -> TrainSpec:
    imgsz: int | tuple[int, int] = t.get("imgsz", 640)
    if isinstance(imgsz, str):
        height, width = imgsz.split("x")
        imgsz = (int(height), int(width))
    device = t.get("device", "all")
    gpus = rules.gpu_list(device)
    return TrainSpec(
        model=t["model"],
        epochs=t["epochs"],
        batch=t.get("batch", 16),
        imgsz=imgsz,
        device=device if gpus is None else ",".join(str(g) for g in gpus),
        save_period=t.get("save_period", min(10, t["epochs"])),
        restarts=t.get("restarts", 2),
        args=MappingProxyType(dict(t.get("args", {}))),
    )


def _build_dataset(d: dict[str, Any]) -> DatasetSpec:
    hub = d.get("hub")
    synthetic = d.get("synthetic")
    return DatasetSpec(
        hub=HubDataset(hub["repo"], hub["file"], hub.get("revision")) if hub else None,
        path=_path(d.get("path")),
        synthetic=SyntheticDataset(**synthetic) if synthetic is not None else None,
        extract_to=_path(d.get("extract_to")),
        data=d.get("data"),
        max_files=int(d.get("max_files", DatasetSpec.max_files)),
    )


def _build_push(p: dict[str, Any] | None, finish: FinishSpec) -> PushSpec | None:
    if p is None:
        return None
    hub = p.get("hub")
    # A machine that will be destroyed gets its weights read back first, whatever was asked.
    ends = finish.action in (FinishAction.DESTROY, FinishAction.AUTO)
    return PushSpec(
        hub=HubTarget(hub["repo"], hub.get("private", True), hub.get("reuse", False))
        if hub
        else None,
        dir=_path(p.get("dir")),
        every=parse_duration(p.get("every", "15m")),
        files=tuple(p["files"]) if "files" in p else DEFAULT_PUSH_FILES,
        read_back=p.get("verify") == "readback" or ends,
    )


def _build_finish(f: dict[str, Any]) -> FinishSpec:
    storage = f.get("storage")
    return FinishSpec(
        action=FinishAction(f.get("action", "none")),
        provider=f.get("provider", "auto"),
        command=tuple(f.get("command", ())),
        unverified=Unverified(f.get("unverified", "stop")),
        storage=StorageSpec(
            allocated_gb=float(storage["allocated_gb"]),
            usd_per_gb_month=float(storage["usd_per_gb_month"]),
            rebuild_usd=float(storage["rebuild_usd"]),
            return_within=parse_duration(storage["return_within"]),
        )
        if storage
        else None,
    )


def _build_watch(w: dict[str, Any], push: dict[str, Any] | None) -> WatchSpec:
    lease = w.get("lease", "5m")
    # Only a Hub repo can carry a lease a watcher elsewhere reads.
    if lease == "none" or not (isinstance(push, dict) and push.get("hub")):
        return WatchSpec(lease=None)
    return WatchSpec(lease=parse_duration(lease))


def _env_value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _build(
    data: dict[str, Any], text: str, digest: str, source: str, base: Path | None = None
) -> Spec:
    if base is not None:
        rebase(data, base)
    finish = _build_finish(data.get("finish", {}))
    b = data["budget"]
    reserve = b.get("reserve", "auto")
    cost = b.get("hourly_cost")
    pre = data.get("preflight", {})
    disk = pre.get("disk", "auto")
    return Spec(
        name=data["name"],
        description=data.get("description", ""),
        dataset=_build_dataset(data["dataset"]),
        train=_build_train(data["train"]),
        output=OutputSpec(project=_path(data.get("output", {}).get("project"))),
        push=_build_push(data.get("push"), finish),
        budget=BudgetSpec(
            wall_clock=parse_duration(b["wall_clock"]),
            reserve=None if reserve == "auto" else parse_duration(reserve),
            overrun=parse_duration(b.get("overrun", "20m")),
            hourly_cost=None if cost is None else float(cost),
            fit=BudgetFit(b["fit"]) if "fit" in b else None,
        ),
        finish=finish,
        preflight=PreflightSpec(
            matmul=pre.get("matmul", True),
            collective=pre.get("collective", True),
            disk=None if disk == "auto" else parse_size(disk),
            doctor=pre.get("doctor", True),
            profile=pre.get("profile", False),
        ),
        resources=build_resources(data.get("resources")),
        watch=_build_watch(data.get("watch", {}), data.get("push")),
        env=MappingProxyType({k: _env_value(v) for k, v in data.get("env", {}).items()}),
        notify=tuple(data["notify"]) if "notify" in data else None,
        source=source,
        text=text,
        sha256=digest,
    )


def check_spec_text(
    raw: str | bytes, source: str, state: Path | None = None, base: Path | None = None
) -> tuple[Spec | None, list[Problem]]:
    """The Spec, or None and every problem found. Never raises for what the text holds.
    `state`: the state folder the spec will run under, where known (its internals are then
    refused as run, push and data folders by their real path too)."""
    doc, problems = load_yaml(raw, source)
    if doc is None:
        return None, problems
    problems = _problems(doc, source, problems, state)
    if problems:
        return None, problems
    data = raw.encode("utf-8") if isinstance(raw, str) else raw
    return _build(doc.data, doc.text, hashlib.sha256(data).hexdigest(), source, base), []


def load_spec_text(
    text: str | bytes, source: str, state: Path | None = None, base: Path | None = None
) -> Spec:
    """`base`: the folder relative `dataset.path` and `train.model` paths mean (the spec
    file's own; runspec.spec.specbase)."""
    spec, problems = check_spec_text(text, source, state, base)
    if spec is None:
        raise SpecInvalid(problems)
    return spec


def _read(path: Path) -> bytes | Problem:
    try:
        return read_spec(path)
    except SpecTooBig as exc:
        return too_big(exc.size, str(path))
    except NotRegularFile as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc


def check_spec_file(path: Path) -> list[Problem]:
    """Every problem in the spec file; [] when valid. Raises UsageError only when the file
    cannot be read."""
    raw = _read(path)
    if isinstance(raw, Problem):
        return [raw]
    return check_spec_text(raw, str(path))[1]


def load_spec(path: Path, state: Path | None = None, base: Path | None = None) -> Spec:
    """The spec in `path`; its relative paths mean `base`, by default the file's folder."""
    raw = _read(path)
    if isinstance(raw, Problem):
        raise SpecInvalid([raw])
    return load_spec_text(raw, str(path), state, base or path.absolute().parent)


class AcceptedSpecUnreadable(RunspecError):
    """An accepted run's spec.yaml that cannot be built into a Spec any more (gone, damaged):
    the one error every reader of an accepted spec handles."""


def load_accepted(path: Path) -> Spec:
    """The spec a run was accepted with (its job folder's spec.yaml), as accepted.

    Judged once, at acceptance, against the rules of the runspec of that day (the record keeps
    their version): today's schema and rules are not asked again, so a rule tightened since
    neither strands nor blocks the run. Only what the build itself needs (a YAML mapping
    with the fields it reads) is required. Raises AcceptedSpecUnreadable, and nothing else.
    """
    try:
        raw = read_spec(path)
    except (OSError, NotRegularFile, SpecTooBig) as exc:
        raise AcceptedSpecUnreadable(f"cannot read {path}: {exc}") from exc
    doc, problems = load_yaml(raw, str(path))
    if doc is None or not isinstance(doc.data, dict):
        why = problems[0].message if problems else "not a mapping"
        raise AcceptedSpecUnreadable(f"{path} is no longer a spec: {why}")
    data = doc.data
    train = data.get("train")
    if isinstance(train, dict) and isinstance(train.get("args"), dict):
        train["args"] = rules.normalise_args(train["args"])[0]
    try:
        digest = hashlib.sha256(raw).hexdigest()
        return _build(data, doc.text, digest, str(path), accepted_base(path))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise AcceptedSpecUnreadable(
            f"{path} is no longer a spec runspec can build ({type(exc).__name__}: {exc})"
        ) from exc
