"""The one duration parser and the one size parser that every spec field uses."""

from __future__ import annotations

import re

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# The schema's pattern for a duration string: one or more <number><unit> parts.
DURATION_PATTERN = r"^(\d+(\.\d+)?[smhd])+$"

_SIZE = re.compile(r"^(\d+(?:\.\d+)?)(MB|GB|TB|MiB|GiB|TiB)$")
_SIZE_UNITS = {
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}
SIZE_PATTERN = r"^\d+(\.\d+)?(MB|GB|TB|MiB|GiB|TiB)$"


def parse_duration(value: str | int | float) -> float:
    """Seconds from `90m`, `1h30m`, `45s` or a plain number of seconds; raises ValueError."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = value.strip()
        if not re.fullmatch(DURATION_PATTERN, text):
            raise ValueError(f"{value!r} is not a duration (use e.g. 90m, 1h30m, 45s)")
        seconds = sum(
            float(num) * _DURATION_UNITS[unit] for num, unit in _DURATION_PART.findall(text)
        )
    if seconds <= 0:
        raise ValueError(f"{value!r} is not a positive duration")
    return seconds


def parse_size(value: str) -> int:
    """Bytes from `120GB`, `1.5TiB`; raises ValueError."""
    match = _SIZE.fullmatch(value.strip())
    if not match:
        raise ValueError(f"{value!r} is not a size (use e.g. 120GB or 500GiB)")
    size = int(float(match.group(1)) * _SIZE_UNITS[match.group(2)])
    if size <= 0:
        raise ValueError(f"{value!r} is not a positive size")
    return size


def format_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
