"""The Hub token never leaves the environment: not in a log line, an error message, the
state folder, the run folder, a pushed file, or anything printed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.fixtures_push import MakeRun
from tests.hubserver import HubServer


def files_holding(root: Path, secret: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret in p.read_bytes()]


def test_token_appears_nowhere(
    hub_server: HubServer,
    hub_token: str,
    make_run: MakeRun,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    run = make_run()
    run.epoch(1)
    pusher = run.pusher(retry_base=3600.0)  # only push_now pushes here
    # A failure whose server message quotes the Authorization header...
    hub_server.fail("commit", "echo")
    assert pusher.push_now(final=False, timeout=60) is None
    error = run.reload().push_error
    assert error is not None and "rejected request with Bearer" in error
    # ...one that fails verification, one that fails at the network, then a good one.
    hub_server.lie_about_sha256()
    assert pusher.push_now(final=False, timeout=60) is None
    hub_server.tell_truth()
    run.epoch(2)
    hub_server.fail("commit", "drop")
    assert pusher.push_now(final=False, timeout=60) is None
    assert pusher.push_now(final=True, timeout=60) is not None
    pusher.stop()

    secret = hub_token.encode()
    assert files_holding(tmp_path, secret) == []
    out, err = capfd.readouterr()
    assert hub_token not in out and hub_token not in err
    assert all(hub_token not in line for line in run.lines)
    leaks = [(r.name, r.getMessage()[:300]) for r in caplog.records if hub_token in r.getMessage()]
    assert leaks == []
    # The echoed token was there, blanked, in what the user reads of the failure: the run's
    # push_error (a push asked for now is said by whoever asked, runspec.push.until).
    assert "***" in error, error


def test_an_unexpected_failure_logs_a_scrubbed_traceback(
    hub_server: HubServer,
    hub_token: str,
    make_run: MakeRun,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    run = make_run()
    run.epoch(1)
    pusher = run.pusher(retry_base=3600.0)

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError(f"a bug that quotes the header Authorization: Bearer {hub_token}")

    monkeypatch.setattr(pusher.target, "push", broken)
    assert pusher.push_now(final=False, timeout=60) is None
    pusher.stop()
    error = run.reload().push_error
    assert error is not None and "RuntimeError" in error and hub_token not in error
    (debug,) = [r for r in caplog.records if r.getMessage().startswith("push failed:\n")]
    # The traceback is in the message, scrubbed; none is attached for a handler to format.
    assert debug.exc_info is None
    assert "Traceback (most recent call last)" in debug.getMessage()
    assert "Bearer ***" in debug.getMessage() and hub_token not in debug.getMessage()
