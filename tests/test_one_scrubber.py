"""One scrubber (issue 18, item 8): a secret registered once (by a push target, a provider, a
notification URL) is blanked in every output: log records, push errors, notification errors;
and the token's shape is written in one place only."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from runspec import alerts
from runspec.push import base
from runspec.secrets import redact
from tests.fixtures_daemon import REPO

SECRET = "registered-s3cret-0123456789"


def test_a_registered_secret_is_blanked_everywhere(caplog: pytest.LogCaptureFixture) -> None:
    redact.install()
    redact.register(SECRET)
    with caplog.at_level(logging.INFO):
        logging.getLogger("runspec.test").info("the server said %s", SECRET)
    assert SECRET not in caplog.text and "***" in caplog.text
    assert SECRET not in base.one_line(RuntimeError(f"push refused {SECRET}"))
    assert SECRET not in alerts.scrub(f"ntfy answered {SECRET}", set())
    assert "hf_***" in alerts.scrub("echoed hf_abcdefghijk", set())  # the shape, there too


def test_the_token_shape_is_written_once() -> None:
    pattern = "hf_[A-Za-z0-9]{6,}"
    holders = [p for p in (REPO / "runspec").rglob("*.py") if pattern in p.read_text()]
    assert holders == [Path(REPO / "runspec" / "secrets" / "redact.py")]
