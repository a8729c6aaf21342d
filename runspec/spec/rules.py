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
from pathlib import Path
from typing import Any, TypeGuard

from runspec.spec import modelnames as models
from runspec.spec import resources
from runspec.spec.envpaths import forbidden_env_path
from runspec.spec.safepaths import FOLDER_FIELDS, forbidden_folder
from runspec.spec.secreturls import written_secret
from runspec.spec.trainargs import BY_KEY, ELSEWHERE, normalise_key
from runspec.units import DURATION_PATTERN, SIZE_PATTERN, parse_duration, parse_size

KeyPath = tuple[str | int, ...]

# The version of these rules, kept in each record at acceptance: raise it whenever a rule
# tightens, so a run's record says which rules judged it (an accepted run is never re-judged).
RULES_VERSION = 1

DURATION_FIELDS: tuple[KeyPath, ...] = (
    ("budget", "wall_clock"),
    ("budget", "reserve"),
    ("budget", "overrun"),
    ("push", "every"),
    ("finish", "storage", "return_within"),
)
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|KEY", re.IGNORECASE)
# Names a spec's env may not set: they change what the trainer runs or loads, or where its
# traffic and the Hub token go. The env is for tuning (OMP_NUM_THREADS, HF_HOME); these belong
# to the machine's own setup (the daemon's EnvironmentFile), which a spec cannot reach.
_ENV_RUNS = frozenset(
    {
        "PATH",
        "HOME",  # moves the stored Hub login and every dotfile the trainer reads
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYTHONUSERBASE",
        "PYTHONPLATLIBDIR",
        "PYTHONEXECUTABLE",
        "PYTHONINSPECT",  # leaves the trainer waiting at a prompt after training
        "PYTHONBREAKPOINT",
        "BASH_ENV",
        "ENV",
        "GCONV_PATH",
        "LIBREYOLO_DATASETS_DIR",  # runspec sets it: where a data.yaml's relative path: lies
    }
)
_ENV_PREFIXES = ("LD_", "RUNSPEC_")  # the dynamic loader's; runspec's own
_ENV_ROUTES = frozenset(
    {
        "HF_ENDPOINT",
        "HUGGINGFACE_CO_STAGING",  # huggingface_hub then talks to its staging Hub
        "HF_INFERENCE_ENDPOINT",
        "HF_TOKEN_PATH",  # HF_TOKEN itself is refused as a secret below
        "OPENID_PROVIDER_URL",
        "ACTIONS_ID_TOKEN_REQUEST_URL",  # where huggingface_hub exchanges an OIDC token
        "HF_OIDC_RESOURCE",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "OPENSSL_CONF",
        "NETRC",
    }
)
_ENV_FIX = "a spec may not set it; remove it (set it up on the machine itself if it must be)"
_SECRET_HOME = (
    "secrets reach runspec through /etc/runspec/env (the daemon's environment) or the Hub's "
    "stored login, "
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
    """A valid duration in seconds; None when absent, `auto` or invalid (reported elsewhere)."""
    try:
        return parse_duration(value)
    except ValueError:
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


def _durations(data: dict[str, Any]) -> Iterator[Finding]:
    # The schema checks the form (<number><unit> parts); the parser knows zero and the limit.
    for path in DURATION_FIELDS:
        value = _get(data, path)
        if isinstance(value, str) and re.fullmatch(DURATION_PATTERN, value):
            try:
                parse_duration(value)
            except ValueError as exc:
                yield Finding(path, str(exc))


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
    # `cuda:1` is torch's own name for GPU 1.
    if isinstance(device, str) and re.fullmatch(r"(cuda:)?[0-9]+(,(cuda:)?[0-9]+)*", device):
        return [int(part.removeprefix("cuda:")) for part in device.split(",")]
    return None


def _train(data: dict[str, Any]) -> Iterator[Finding]:
    train = data.get("train")
    if not isinstance(train, dict):
        return
    model = train.get("model")
    if isinstance(model, str) and model and (why := models.problem(model)) is not None:
        yield Finding(("train", "model"), why)
    gpus = gpu_list(train.get("device"))
    if gpus is not None:
        repeated = sorted({g for g in gpus if gpus.count(g) > 1})
        if repeated:
            listed = ", ".join(str(g) for g in repeated)
            yield Finding(("train", "device"), f"GPU {listed} listed more than once in device")
    # The global batch is split across every process: each GPU listed, or each GPU that
    # resources.gpus rents, on every node (runspec.spec.resources).
    split = resources.processes(data, None if gpus is None else len(set(gpus)))
    batch = train.get("batch")
    if split is not None and _is_int(batch) and split[0] > 1:
        count, across = split
        if batch == -1:
            yield Finding(
                ("train", "batch"),
                f"batch -1 (auto) sizes one GPU only; with {across} give the global "
                f"batch, a multiple of {count}",
            )
        elif batch > 0 and batch % count:
            yield Finding(
                ("train", "batch"),
                f"batch {batch} does not divide evenly across {across} (it is the "
                f"global batch, split across them): use a multiple of {count}",
            )
    for path, message in resources.problems(data, gpus):
        yield Finding(path, message)
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
    pre = data.get("preflight")
    profiled = isinstance(pre, dict) and pre.get("profile") is True
    if _get(data, ("budget", "fit")) == "epochs" and not profiled:
        yield Finding(
            ("budget", "fit"),
            "fit epochs needs the profile's measured epoch: set preflight.profile: true "
            "(or fit: none)",
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
    push = data.get("push")
    local = push.get("dir") if isinstance(push, dict) else None
    relative = isinstance(local, str) and not local.startswith(("/", "~"))
    if action in ("destroy", "auto") and relative:
        yield Finding(
            ("push", "dir"),
            f"push.dir {local!r} is relative: it lies under the state folder, on this "
            f"machine's own disk, so finish action {action} would destroy the only copy; "
            "push to the Hub (push.hub), to a mounted volume (an absolute path), or use "
            "finish action stop",
        )
    if action == "auto" and "storage" not in finish:
        yield Finding(
            ("finish", "action"),
            "finish action auto needs finish.storage (allocated_gb, usd_per_gb_month, "
            "rebuild_usd, return_within) to choose between stop and destroy",
        )


def forbidden_env(name: str) -> str | None:
    """Why a spec's env may not set `name`; None when it may."""
    upper = name.upper()
    if upper == "CUDA_VISIBLE_DEVICES":
        return f"{name!r} would override train.device: choose the GPUs with train.device"
    if upper in _ENV_ROUTES:
        return f"{name!r} decides where the trainer's traffic or the Hub token goes: {_ENV_FIX}"
    if upper in _ENV_RUNS or upper.startswith(_ENV_PREFIXES):
        return f"{name!r} changes what the trainer runs or loads: {_ENV_FIX}"
    return None


def _env(data: dict[str, Any], state: Path | None) -> Iterator[Finding]:
    env = data.get("env")
    if not isinstance(env, dict):
        return
    for name, value in env.items():
        forbidden = forbidden_env(name)
        where = forbidden_env_path(name, value, state)
        if forbidden:
            yield Finding(("env", name), forbidden, True)
        elif where:
            yield Finding(("env", name), where)
        elif _SECRET_NAME.search(name):
            yield Finding(("env", name), f"{name!r} looks like a secret: {_SECRET_HOME}", True)
        elif isinstance(value, str) and value.startswith("hf_"):
            yield Finding(
                ("env", name), f"the value of {name} looks like a Hub token: {_SECRET_HOME}"
            )


def _notify(data: dict[str, Any]) -> Iterator[Finding]:
    urls = data.get("notify")
    if not isinstance(urls, list):
        return
    for index, url in enumerate(urls):
        if isinstance(url, str) and (what := written_secret(url)) is not None:
            yield Finding(
                ("notify", index),
                f"this URL holds {what}: write the URL (or its token) as ${{NAME}} and set "
                "NAME in /etc/runspec/env (under an engine: its secrets), "
                "never in a spec",
            )


def _folders(data: dict[str, Any], state: Path | None) -> Iterator[Finding]:
    for field in FOLDER_FIELDS:
        value = _get(data, field.path)
        if not isinstance(value, str) or not value:
            continue
        why = forbidden_folder(value, state, is_file=field.is_file)
        if why:
            yield Finding(
                field.path,
                f"{value!r} {why}: {field.what} may not go there; {field.fix}",
            )


LEASE_MIN_S = 10.0


def _watch(data: dict[str, Any]) -> Iterator[Finding]:
    lease = _get(data, ("watch", "lease"))
    seconds = _seconds(lease)
    if seconds is not None and seconds < LEASE_MIN_S:
        yield Finding(("watch", "lease"), f"lease {lease} is too short: use at least 10s")
    if lease is not None and lease != "none" and not _get(data, ("push", "hub")):
        yield Finding(
            ("watch", "lease"),
            "a lease lives in the run's Hub repo: set push.hub, or lease: none",
        )


def check_rules(data: dict[str, Any], state: Path | None = None) -> list[Finding]:
    """Every rule beyond the schema, in the order of spec-v1.md. `state` is the state folder
    where it is known (the daemon, `runspec run`): its own folders are refused as targets."""
    findings: list[Finding] = []
    for rule in (_finite, _durations, _positive_size, _train, _budget, _finish, _watch):
        findings.extend(rule(data))
    findings.extend(_env(data, state))
    findings.extend(_notify(data))
    findings.extend(_folders(data, state))
    return findings
