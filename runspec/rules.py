"""The rules of spec-v1.md that JSON Schema cannot say.

Each rule reads the plain values (after YAML, before the typed Spec) and returns findings:
the path of the field to blame and the message. A rule across fields blames the field its
sentence names first. Every rule checks the types it relies on and stays silent otherwise,
because the schema has already reported a wrongly typed field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeGuard

from runspec.trainargs import BY_KEY, ELSEWHERE, normalise_key
from runspec.units import DURATION_PATTERN, SIZE_PATTERN, parse_duration, parse_size

KeyPath = tuple[str | int, ...]

DURATION_FIELDS: tuple[KeyPath, ...] = (
    ("budget", "wall_clock"),
    ("budget", "reserve"),
    ("budget", "overrun"),
    ("push", "every"),
    ("finish", "storage", "return_within"),
)
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|KEY", re.IGNORECASE)
_SECRET_HOME = (
    "secrets reach runspec through the daemon's EnvironmentFile or the Hub's stored login, "
    "never through a spec that may be committed to git"
)


@dataclass(frozen=True)
class Finding:
    path: KeyPath
    message: str
    at_key: bool = False  # point at the key (unknown or forbidden keys), not its value


def _get(data: Any, path: KeyPath) -> Any:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _seconds(value: Any) -> float | None:
    """A duration the schema accepts, in seconds; None when absent, `auto` or invalid."""
    if isinstance(value, str) and re.fullmatch(DURATION_PATTERN, value):
        try:
            return parse_duration(value)
        except ValueError:
            return None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def normalise_args(args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str], list[Finding]]:
    """`train.args` with underscored keys; also the original spelling of each renamed key,
    and findings for keys the spec sets elsewhere or that are given twice."""
    result: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    findings: list[Finding] = []
    for key, value in args.items():
        norm = normalise_key(key)
        path: KeyPath = ("train", "args", key)
        if norm in ELSEWHERE and norm not in BY_KEY:
            findings.append(
                Finding(path, f"{key!r} does not belong in train.args: {ELSEWHERE[norm]}", True)
            )
        elif norm in result:
            first = spelled.get(norm, norm)
            message = f"{key!r} repeats {first!r} (dashes and underscores are the same)"
            findings.append(Finding(path, message, True))
        else:
            result[norm] = value
            if norm != key:
                spelled[norm] = key
    return result, spelled, findings


def _finite(data: dict[str, Any]) -> Iterator[Finding]:
    stack: list[tuple[KeyPath, Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            yield Finding(path, f"{value} is not a finite number")
        elif isinstance(value, dict):
            stack.extend(((*path, k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*path, i), v) for i, v in enumerate(value))


def _positive_durations(data: dict[str, Any]) -> Iterator[Finding]:
    for path in DURATION_FIELDS:
        value = _get(data, path)
        if isinstance(value, str) and re.fullmatch(DURATION_PATTERN, value):
            try:
                parse_duration(value)
            except ValueError:
                yield Finding(
                    path,
                    f"{value!r} is not a positive duration: use e.g. 90m, 1h30m, 45s, "
                    "or a number of seconds",
                )


def _positive_size(data: dict[str, Any]) -> Iterator[Finding]:
    path: KeyPath = ("preflight", "disk")
    value = _get(data, path)
    if isinstance(value, str) and re.fullmatch(SIZE_PATTERN, value):
        try:
            parse_size(value)
        except ValueError:
            yield Finding(path, f"{value!r} is not a positive size: use e.g. 120GB or 500GiB")


def gpu_list(device: Any) -> list[int] | None:
    """The GPU indices a device value names; None for cpu, all, or a value the schema refuses."""
    if _is_int(device) and device >= 0:
        return [device]
    if isinstance(device, str) and re.fullmatch(r"[0-9]+(,[0-9]+)*", device):
        return [int(part) for part in device.split(",")]
    return None


def _train(data: dict[str, Any]) -> Iterator[Finding]:
    train = data.get("train")
    if not isinstance(train, dict):
        return
    gpus = gpu_list(train.get("device"))
    if gpus is not None:
        repeated = sorted({g for g in gpus if gpus.count(g) > 1})
        if repeated:
            listed = ", ".join(str(g) for g in repeated)
            yield Finding(("train", "device"), f"GPU {listed} listed more than once in device")
        count = len(set(gpus))
        batch = train.get("batch")
        if _is_int(batch) and count > 1:
            if batch == -1:
                yield Finding(
                    ("train", "batch"),
                    f"batch -1 (auto) sizes one GPU only; with {count} GPUs give the global "
                    f"batch, a multiple of {count}",
                )
            elif batch > 0 and batch % count:
                yield Finding(
                    ("train", "batch"),
                    f"batch {batch} does not divide evenly across {count} GPUs (it is the "
                    f"global batch, split across them): use a multiple of {count}",
                )
    epochs, period = train.get("epochs"), train.get("save_period")
    if _is_int(epochs) and _is_int(period) and epochs >= 1 and period > epochs:
        yield Finding(
            ("train", "save_period"),
            f"save_period {period} exceeds epochs {epochs}: use at most {epochs}",
        )


def _budget(data: dict[str, Any]) -> Iterator[Finding]:
    reserve = _seconds(_get(data, ("budget", "reserve")))
    wall = _seconds(_get(data, ("budget", "wall_clock")))
    if reserve is not None and wall is not None and reserve >= wall:
        shown = _get(data, ("budget", "reserve"))
        yield Finding(
            ("budget", "reserve"),
            f"reserve {shown} leaves no time of wall_clock {_get(data, ('budget', 'wall_clock'))} "
            "for the run: make it smaller than wall_clock",
        )


def _finish(data: dict[str, Any]) -> Iterator[Finding]:
    finish = data.get("finish")
    if not isinstance(finish, dict):
        return
    action = finish.get("action")
    if action in ("destroy", "auto") and "push" not in data:
        yield Finding(
            ("finish", "action"),
            f"finish action {action} needs a push section: a machine is never destroyed "
            "with its weights only on its own disk",
        )
    if action == "auto" and "storage" not in finish:
        yield Finding(
            ("finish", "action"),
            "finish action auto needs finish.storage (allocated_gb, usd_per_gb_month, "
            "rebuild_usd, return_within) to choose between stop and destroy",
        )


def _env(data: dict[str, Any]) -> Iterator[Finding]:
    env = data.get("env")
    if not isinstance(env, dict):
        return
    for name, value in env.items():
        if _SECRET_NAME.search(name):
            yield Finding(("env", name), f"{name!r} looks like a secret: {_SECRET_HOME}", True)
        elif isinstance(value, str) and value.startswith("hf_"):
            yield Finding(
                ("env", name), f"the value of {name} looks like a Hub token: {_SECRET_HOME}"
            )


def check_rules(data: dict[str, Any]) -> list[Finding]:
    """Every rule beyond the schema, in the order of spec-v1.md."""
    findings: list[Finding] = []
    for rule in (_finite, _positive_durations, _positive_size, _train, _budget, _finish, _env):
        findings.extend(rule(data))
    return findings
