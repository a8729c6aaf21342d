"""Numbers read from outside (a server's answer, the environment, a lock file) are ASCII digits
or nothing: str.isdigit() also takes a superscript or a circled digit, which int() then
refuses, and each reader below crashed on one instead of treating it as no number."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runspec.clock import ManualClock
from runspec.daemon.notify import Notifier
from runspec.providers import Action, ProviderError
from runspec.providers.hetzner import Hetzner
from runspec.store.locks import FileLock, Holder, holder
from runspec.trainer.multinode import DEFAULT_RENDEZVOUS, RENDEZVOUS_ENV, rendezvous_timeout
from runspec.units import plain_int
from tests.fixtures_providers import Answer, StandIn

ODD = ("²", "①", "١٢", " 7", "7.0", "-3", "")


def test_plain_int_reads_ascii_digits_only() -> None:
    assert plain_int("0") == 0 and plain_int("600") == 600
    for text in ODD:
        assert plain_int(text) is None, text


@pytest.mark.parametrize("usec", ODD)
def test_a_watchdog_interval_that_is_no_number_turns_the_watchdog_off(usec: str) -> None:
    assert Notifier({"WATCHDOG_USEC": usec}).watchdog_usec == 0
    assert Notifier({"WATCHDOG_USEC": "30000000"}).watchdog_usec == 30_000_000


@pytest.mark.parametrize("raw", [t for t in ODD if t.strip() != "7"])  # spaces are trimmed
def test_a_rendezvous_timeout_that_is_no_number_is_the_default(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RENDEZVOUS_ENV, raw)
    assert rendezvous_timeout() == DEFAULT_RENDEZVOUS
    monkeypatch.setenv(RENDEZVOUS_ENV, "45")
    assert rendezvous_timeout() == 45


def test_a_lock_file_whose_pid_is_no_number_still_says_the_lock_is_held(tmp_path: Path) -> None:
    path = tmp_path / "owner.lock"
    first = FileLock(path, "runspec daemon")
    assert first.try_acquire() is None
    try:
        assert holder(path) == Holder(os.getpid(), "runspec daemon")
        fd = os.open(path, os.O_WRONLY)
        os.pwrite(fd, "²² runspec daemon\n".encode(), 0)
        os.close(fd)
        assert FileLock(path).try_acquire() == Holder(-1, "")  # held, by nobody it can name
        assert holder(path) == Holder(-1, "")
    finally:
        first.release()
    assert holder(path) is None


def test_a_hetzner_server_id_that_is_no_number_is_refused(
    standin: StandIn, provider_env: dict[str, str]
) -> None:
    env = {**provider_env, "HCLOUD_TOKEN": "hcloud-token"}
    standin.on("GET", r"/hetzner/v1/metadata/instance-id", Answer(200, "４２"))  # fullwidth
    with pytest.raises(ProviderError, match="gave no server id"):
        Hetzner(env, clock=ManualClock()).apply(Action.DESTROY)  # type: ignore[arg-type]
    assert standin.made("DELETE") == []
