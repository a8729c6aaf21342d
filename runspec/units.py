"""The one duration parser and the one size parser that every spec field (and the daemon's
config) uses."""

from __future__ import annotations

import re

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# The schema's pattern for a duration string: one or more <number><unit> parts.
DURATION_PATTERN = r"^(\d+(\.\d+)?[smhd])+$"
# No run, wait or schedule takes longer; a value past it is a typo (or 1e308), and the clock
# arithmetic it would reach (datetimes, timers) overflows long before infinity.
MAX_DURATION = 30 * 86400.0

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


def plain_int(text: str) -> int | None:
    """A whole number in ASCII digits (no sign, no space, no dot), else None. The one reading
    of a number that comes from outside (a file, a server, the environment, an argument):
    str.isdigit() also takes superscripts and circled digits, which int() then refuses."""
    return int(text) if text.isascii() and text.isdigit() else None


def bare_number(text: str) -> str:
    """Why a number written without a unit is refused where a duration goes, and the fix."""
    if re.fullmatch(r"\d+(\.\d+)?", text):
        # `wall_clock: 6` is six hours as often as six seconds: the writer says which.
        return f"{text} has no unit: write {text}m, {text}h or {text}s"
    return f"{text} is not a duration: give a number and a unit, e.g. 90m, 1h30m, 45s"


def parse_duration(value: str) -> float:
    """Seconds from `90m`, `1h30m`, `45s`; raises ValueError with the fix for anything else:
    a bare number (no unit), zero, or more than MAX_DURATION."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise ValueError(bare_number(str(value)))
    if not isinstance(value, str) or not re.fullmatch(DURATION_PATTERN, value.strip()):
        raise ValueError(f"{value!r} is not a duration: use e.g. 90m, 1h30m, 45s")
    text = value.strip()
    seconds = sum(float(num) * _DURATION_UNITS[unit] for num, unit in _DURATION_PART.findall(text))
    if seconds <= 0:
        raise ValueError(f"{value!r} is not a positive duration: use e.g. 90m, 1h30m, 45s")
    if seconds > MAX_DURATION:
        raise ValueError(
            f"{value!r} is longer than 30 days, the most any duration may be: use at most 30d"
        )
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
