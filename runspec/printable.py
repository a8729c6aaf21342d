"""Text from a spec or a file name, made safe to show on a terminal, in a log or a file.

A value like `"\\x1b[2J"` in a spec, or a file name holding a newline or a right-to-left
override, would otherwise clear the reader's screen, forge a log line or show a different name
than the one on disk. Everything shown that a spec or a file name can reach goes through
`printable()` once, just before it is shown.
"""

from __future__ import annotations

import logging
import re

# C0 controls and DEL, C1 controls, invisible format characters (bidi marks, embeddings,
# overrides and isolates, zero-width characters, the BOM, interlinear annotations, tag
# characters), line and paragraph separators, and lone surrogates: os.fsdecode() turns a
# file name's bytes that are not UTF-8 into U+DC80..U+DCFF.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\ufeff\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8: show the byte
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str) -> str:
    """`text` with every control, invisible formatting character and undecodable byte shown
    as a Python-style escape (`\\x1b`, `\\n`, `\\u202e`, `\\xff`); other text unchanged."""
    return _UNSAFE.sub(_escape, text)


def printable_lines(text: str) -> str:
    """`printable()` for each line of a text meant to span lines (a list of problems)."""
    return "\n".join(printable(part) for part in text.split("\n"))


class PrintableFormatter(logging.Formatter):
    """A log formatter that escapes the message (one log entry stays one line) and leaves a
    traceback's own lines as they are."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = printable(record.message)
        return super().formatMessage(record)


def setup_logging(level: int, fmt: str) -> None:
    """logging.basicConfig (to stderr) with every message escaped."""
    logging.basicConfig(level=level, format=fmt)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(PrintableFormatter(fmt))
