"""printable(): what a spec value or a file name may hold, shown as text and never acted on."""

from __future__ import annotations

import logging
import os
import sys

import pytest

from runspec.printable import PrintableFormatter, printable


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J\x1b[31mred", "\\x1b[2J\\x1b[31mred"),  # clear screen, colour
        ("a\rb\nc\td", "a\\rb\\nc\\td"),
        ("\x9b31m", "\\x9b31m"),  # the C1 control sequence introducer
        ("\x00\x07\x7f", "\\x00\\x07\\x7f"),
        ("evil\u202egnp.yaml", "evil\\u202egnp.yaml"),  # a right-to-left override
        ("\u2066x\u2069\u200b\ufeff", "\\u2066x\\u2069\\u200b\\ufeff"),  # isolates, zero-width
        ("\u2028line", "\\u2028line"),
        ("\U000e0041tag", "\\U000e0041tag"),
        (os.fsdecode(b"caf\xe9.yaml"), "caf\\xe9.yaml"),  # a byte that is not UTF-8
        ("café 日本 naïve-run_1.yaml", "café 日本 naïve-run_1.yaml"),  # ordinary text as is
    ],
)
def test_controls_and_invisible_characters_are_escaped(raw: str, shown: str) -> None:
    assert printable(raw) == shown
    assert printable(shown) == shown  # escaping twice changes nothing
    assert shown.isprintable()


def test_a_log_message_stays_one_line_and_a_traceback_keeps_its_lines() -> None:
    formatter = PrintableFormatter("%(levelname)s %(message)s")
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord(
            "t", logging.ERROR, __file__, 1, "rejected %s", ("a\nb\x1b[2J",), exc_info=True
        )
        record.exc_info = sys.exc_info()
    text = formatter.format(record)
    first, *rest = text.split("\n")
    assert first == "ERROR rejected a\\nb\\x1b[2J"
    assert rest[0] == "Traceback (most recent call last):"
