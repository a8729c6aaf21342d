"""Spec file -> frozen `Spec`, or every problem in it, each at its line and column.

Steps: YAML (runspec.yamlload), `train.args` keys normalised, JSON Schema (every error),
the rules beyond the schema (runspec.rules), then the typed Spec with defaults applied.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import stat
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from jsonschema import Draft202012Validator

from runspec import rules
from runspec.errors import Problem, SpecInvalid, UsageError
from runspec.model import (
    DEFAULT_PUSH_FILES,
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
)
from runspec.units import parse_duration, parse_size
from runspec.yamlload import MAX_BYTES, YamlDocument, json_pointer, load_yaml, too_big

SCHEMA_PATH = Path(__file__).resolve().parent / "schema" / "runspec.schema.json"

JsonPath = tuple[str | int, ...]

_TOP_HINTS = {
    "runspec": "add runspec: 1 (the format version)",
    "name": "the run's id, e.g. name: yolo9s-run1",
    "dataset": "one of hub, path or synthetic",
    "train": "model and epochs at least",
    "budget": "wall_clock at least, e.g. budget: {wall_clock: 6h}",
}
_YAML11_BOOLS = ("yes", "no", "on", "off", "y", "n")
_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


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


def show(value: Any) -> str:
    """A value as the spec writer typed it, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return str(value)


def _did_you_mean(word: str, choices: list[str]) -> str:
    # A close spelling first; else the keys it starts (`warmup` -> `warmup_epochs`). Dashed
    # spellings of underscored keys are aliases, not suggestions.
    choices = [c for c in choices if "-" not in c or c.replace("-", "_") not in choices]
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.75)
    close = close or sorted(c for c in choices if c.startswith(word) and c != word)[:3]
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"


class _Reporter:
    """Turns paths and messages into located Problems."""

    def __init__(self, doc: YamlDocument, source: str, spelled: dict[str, str]) -> None:
        self.doc = doc
        self.source = source
        self.spelled = spelled  # train.args keys as the file spells them
        self.problems: list[Problem] = []

    def _as_written(self, path: JsonPath) -> JsonPath:
        if len(path) >= 3 and path[:2] == ("train", "args") and isinstance(path[2], str):
            return (*path[:2], self.spelled.get(path[2], path[2]), *path[3:])
        return path

    def add(self, path: JsonPath, message: str, *, at_key: bool = False) -> None:
        written = self._as_written(path)
        mark = self.doc.key_mark(written) if at_key else self.doc.value_mark(written)
        problem = Problem(self.source, mark.line, mark.column, json_pointer(written), message)
        if problem not in self.problems:
            self.problems.append(problem)

    def missing(self, parent: JsonPath, key: str, message: str) -> None:
        """A missing key is reported at its parent's line (the parent's key, if it has one)."""
        mark = self.doc.key_mark(parent)
        pointer = json_pointer((*self._as_written(parent), key))
        problem = Problem(self.source, mark.line, mark.column, pointer, message)
        if problem not in self.problems:
            self.problems.append(problem)


def _quote_hint(error: Any, report: _Reporter) -> str:
    """`name: 08` is the number 8 in YAML 1.2; say so where a string was wanted."""
    wanted = error.validator_value if error.validator == "type" else None
    if wanted != "string" and not (isinstance(wanted, list) and "string" in wanted):
        return ""
    text = report.doc.plain_texts.get(tuple(error.absolute_path))
    if not text:
        return ""
    if text == show(error.instance):
        return f" (quote it for a string: '{text}')"
    return f" (YAML reads {text} as {show(error.instance)}; quote it: '{text}')"


def _schema_problems(error: Any, report: _Reporter) -> None:
    path: JsonPath = tuple(error.absolute_path)
    kind = error.validator
    sub = error.schema if isinstance(error.schema, dict) else {}
    custom = sub.get("errorMessage")
    instance = error.instance
    if kind == "additionalProperties":
        known = list(sub.get("properties", {}))
        for key in instance:
            if key not in known:
                report.add(
                    (*path, key), f"unknown key {key!r}{_did_you_mean(key, known)}", at_key=True
                )
    elif kind == "required":
        for key in error.validator_value:
            if key in instance:
                continue
            if custom:
                message = custom
            elif not path and key in _TOP_HINTS:
                message = f"missing required key {key!r}: {_TOP_HINTS[key]}"
            else:
                message = f"missing required key {key!r}"
            report.missing(path, key, message)
    elif kind == "not" and custom and "required" in error.validator_value:
        for key in error.validator_value["required"]:
            report.add((*path, key), custom, at_key=True)
    elif kind == "oneOf" and isinstance(instance, dict):
        choices = [branch["required"][0] for branch in error.validator_value]
        given = [c for c in choices if c in instance]
        listed = ", ".join(choices[:-1]) + f" or {choices[-1]}"
        if given:
            message = f"give exactly one of {listed}: {' and '.join(given)} are all set"
            if len(given) == 2:
                message = message.replace("are all set", "are both set")
        else:
            message = f"give one of {listed}"
        report.add(path, message, at_key=True)
    elif "propertyNames" in error.relative_schema_path:
        # jsonschema reports a bad key at its object's path, the key itself as the instance.
        report.add(
            (*path, instance),
            f"{instance!r} is not an environment variable name: use letters, digits and '_', "
            "not starting with a digit",
            at_key=True,
        )
    elif custom:
        report.add(path, custom.format(value=show(instance)) + _quote_hint(error, report))
    elif kind == "type":
        wanted = error.validator_value
        names = [_TYPE_NAMES[t] for t in ([wanted] if isinstance(wanted, str) else wanted)]
        hint = ""
        if wanted == "boolean" and isinstance(instance, str) and instance.lower() in _YAML11_BOOLS:
            hint = " (YAML 1.2 reads yes/no/on/off as strings: write true or false)"
        if wanted == "object" and instance is None:
            hint = " (a key with nothing after it is null: write {} for an empty mapping)"
        hint = hint or _quote_hint(error, report)
        report.add(path, f"expected {' or '.join(names)}, got {show(instance)}{hint}")
    elif kind == "enum":
        choices = [str(c) for c in error.validator_value]
        hint = _did_you_mean(instance, choices) if isinstance(instance, str) else ""
        report.add(path, f"{show(instance)} is not one of {', '.join(choices)}{hint}")
    elif kind == "minItems":
        report.add(path, "the list is empty; give at least one item")
    elif kind == "minLength":
        report.add(path, "the string is empty")
    elif kind == "const":
        report.add(path, f"{show(instance)} must be {show(error.validator_value)}")
    else:
        report.add(path, error.message)


def _problems(doc: YamlDocument, source: str, yaml_problems: list[Problem]) -> list[Problem]:
    data = doc.data
    spelled: dict[str, str] = {}
    findings: list[rules.Finding] = []
    train = data.get("train")
    if isinstance(train, dict) and isinstance(train.get("args"), dict):
        train["args"], spelled, findings = rules.normalise_args(train["args"])
    report = _Reporter(doc, source, spelled)
    report.problems.extend(yaml_problems)
    for error in _validator().iter_errors(data):
        _schema_problems(error, report)
    for finding in [*findings, *rules.check_rules(data)]:
        report.add(finding.path, finding.message, at_key=finding.at_key)
    return sorted(report.problems, key=lambda p: (p.line, p.column, p.pointer, p.message))


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
    )


def _build_push(p: dict[str, Any] | None) -> PushSpec | None:
    if p is None:
        return None
    hub = p.get("hub")
    return PushSpec(
        hub=HubTarget(hub["repo"], hub.get("private", True)) if hub else None,
        dir=_path(p.get("dir")),
        every=parse_duration(p.get("every", "15m")),
        files=tuple(p["files"]) if "files" in p else DEFAULT_PUSH_FILES,
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


def _env_value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _build(data: dict[str, Any], text: str, digest: str, source: str) -> Spec:
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
        push=_build_push(data.get("push")),
        budget=BudgetSpec(
            wall_clock=parse_duration(b["wall_clock"]),
            reserve=None if reserve == "auto" else parse_duration(reserve),
            overrun=parse_duration(b.get("overrun", "20m")),
            hourly_cost=None if cost is None else float(cost),
        ),
        finish=_build_finish(data.get("finish", {})),
        preflight=PreflightSpec(
            matmul=pre.get("matmul", True),
            collective=pre.get("collective", True),
            disk=None if disk == "auto" else parse_size(disk),
            doctor=pre.get("doctor", True),
            profile=pre.get("profile", False),
        ),
        env=MappingProxyType({k: _env_value(v) for k, v in data.get("env", {}).items()}),
        source=source,
        text=text,
        sha256=digest,
    )


def check_spec_text(raw: str | bytes, source: str) -> tuple[Spec | None, list[Problem]]:
    """The Spec, or None and every problem found. Never raises for what the text holds."""
    doc, problems = load_yaml(raw, source)
    if doc is None:
        return None, problems
    problems = _problems(doc, source, problems)
    if problems:
        return None, problems
    data = raw.encode("utf-8") if isinstance(raw, str) else raw
    return _build(doc.data, doc.text, hashlib.sha256(data).hexdigest(), source), []


def load_spec_text(text: str | bytes, source: str) -> Spec:
    spec, problems = check_spec_text(text, source)
    if spec is None:
        raise SpecInvalid(problems)
    return spec


def _read(path: Path) -> bytes | Problem:
    try:
        # Only regular files: opening a FIFO or a device could wait forever.
        if not stat.S_ISREG(path.stat().st_mode):
            raise UsageError(f"cannot read {path}: not a regular file")
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_BYTES:
                return too_big(size, str(path))
            return f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc


def check_spec_file(path: Path) -> list[Problem]:
    """Every problem in the spec file; [] when valid. Raises UsageError only when the file
    cannot be read."""
    raw = _read(path)
    if isinstance(raw, Problem):
        return [raw]
    return check_spec_text(raw, str(path))[1]


def load_spec(path: Path) -> Spec:
    raw = _read(path)
    if isinstance(raw, Problem):
        raise SpecInvalid([raw])
    return load_spec_text(raw, str(path))
