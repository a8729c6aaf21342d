"""A lease's fields read strictly: each one typed and bounded, anything else refused.

A lease comes from a repo that anyone in its org may write, so every value that steers a
request is checked against what the provider allows before it can reach one: an instance id is
a short run of letters, digits and `-_.:` (never a path or a host), an AWS region is a region
name like `us-east-1` (never a host: the watcher's signed requests go to
`ec2.REGION.amazonaws.com`), a provider is a name runspec knows. Numbers are finite, times are
ISO 8601, and keys this runspec does not know are refused (the schema number says when a lease
grows a field).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from runspec.clock import parse_utc_iso
from runspec.errors import RunspecError

LEASE_SCHEMA = 1
MAX_LEASE_S = 24 * 3600.0  # longer than any renewal a spec allows to be useful
MAX_TEXT = 256
MAX_WEIGHTS = 64
STATES = frozenset(
    {"queued", "preflight", "staging", "training", "stopping", "pushing", "finishing", "finished"}
)
AWS_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$")
INSTANCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_:.-]{0,127}$")
# GCP's instance is the Compute API's path to it (runspec.providers.gcp.identify).
GCP_INSTANCE = re.compile(
    r"^projects/[a-z0-9][a-z0-9.:-]{0,62}/zones/[a-z]+-[a-z]+[0-9]+-[a-z]"
    r"/instances/[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"
)
PROVIDER = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
WEIGHT = re.compile(r"^weights/[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\.pt$")


class LeaseError(RunspecError):
    """The lease could not be read or written (the Hub's fault or the file's)."""


class DamagedLease(LeaseError):
    """The file is there but is no lease this runspec reads."""


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise DamagedLease(f"the lease's {key} is not a string of at most {MAX_TEXT} characters")
    return value


def _time(value: Any, key: str) -> str:
    text = _text(value, key)
    try:
        parse_utc_iso(text)
    except (ValueError, OverflowError) as exc:
        raise DamagedLease(f"the lease's {key} is not an ISO 8601 time") from exc
    return text


def _int(value: Any, key: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 10**7:
        raise DamagedLease(f"the lease's {key} is not a whole number from 0 to 10000000")
    return value


def _interval(value: Any, key: str) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not 0 < value <= MAX_LEASE_S:
        raise DamagedLease(f"the lease's {key} is not a number of seconds up to {MAX_LEASE_S:g}")
    return float(value) if isinstance(value, float) else value


def _flag(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise DamagedLease(f"the lease's {key} is not true or false")
    return value


def _state(value: Any, key: str) -> str:
    if value not in STATES:
        raise DamagedLease(f"the lease's {key} is not a run state")
    return str(value)


def _matching(pattern: re.Pattern[str], what: str) -> Callable[[Any, str], str]:
    def read(value: Any, key: str) -> str:
        if not isinstance(value, str) or not pattern.match(value) or ".." in value:
            raise DamagedLease(f"the lease's {key} is not {what}")
        return value

    return read


def _object(value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, dict) or len(value) > 32:
        raise DamagedLease(f"the lease's {key} is not an object")
    for name, item in value.items():
        if not isinstance(item, str | int | float | bool) and item is not None:
            raise DamagedLease(f"the lease's {key}.{name} is not a plain value")
        if isinstance(item, str):
            _text(item, f"{key}.{name}")
    return value


def _weights(value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, dict) or len(value) > MAX_WEIGHTS:
        raise DamagedLease(f"the lease's {key} is not an object of at most {MAX_WEIGHTS} files")
    for path, entry in value.items():
        if not WEIGHT.match(path) or ".." in path:
            raise DamagedLease(f"the lease's {key} names {path!r}, not a weights/*.pt file")
        if not isinstance(entry, dict) or set(entry) != {"size", "sha256"}:
            raise DamagedLease(f"the lease's {key}[{path!r}] is not {{size, sha256}}")
        size = entry["size"]
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size < 2**40:
            raise DamagedLease(f"the lease's {key}[{path!r}] size is not a file's size")
        _matching(SHA256, "a sha256")(entry["sha256"], f"{key} sha256")
    return value


REQUIRED: dict[str, Callable[[Any, str], Any]] = {
    "schema": _int,
    "run": _text,
    "vouched_until": _time,
    "state": _state,
    "epoch": _int,
    "renewed_at": _time,
    "lease_s": _interval,
    "final_verified": _flag,
}
OPTIONAL: dict[str, Callable[[Any, str], Any]] = {
    "newest_local": _text,
    "newest_verified": _text,
    "deadline": _time,
    "provider": _matching(PROVIDER, "a provider's name"),
    "instance": _text,  # checked with its provider, below
    "region": _matching(AWS_REGION, "a region name like us-east-1"),
    "timer": _object,
    "ended_by": _object,
    "final_weights": _weights,
    "seal": _matching(SHA256, "a seal"),
}


def read_fields(data: Any) -> dict[str, Any]:
    """The lease's fields, each typed and bounded; raises DamagedLease naming the first that
    is not."""
    if not isinstance(data, dict):
        raise DamagedLease("the lease is not a JSON object")
    if data.get("schema") != LEASE_SCHEMA or isinstance(data.get("schema"), bool):
        raise DamagedLease(f"lease schema {str(data.get('schema'))[:20]!r}; this runspec reads 1")
    unknown = sorted(set(data) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise DamagedLease(f"the lease holds {unknown[0][:40]!r}, no field of schema 1")
    out: dict[str, Any] = {}
    for key, read in REQUIRED.items():
        if key not in data:
            raise DamagedLease(f"the lease's {key} is missing")
        out[key] = read(data[key], key)
    for key, read in OPTIONAL.items():
        if data.get(key) is not None:
            out[key] = read(data[key], key)
    if "instance" in out:
        gcp = out.get("provider") == "gcp"
        shape = (GCP_INSTANCE, "a GCP instance path") if gcp else (INSTANCE, "an instance id")
        _matching(*shape)(out["instance"], "instance")
    return out
