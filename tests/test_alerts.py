"""Messages through apprise URLs against local endpoints: a hung or refusing one never holds a
run up for long, and no token from a URL reaches a line a person reads."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runspec.alerts import Alerts, Message, expand, secrets_of, with_timeouts
from runspec.daemon.config import ConfigError, load_config

MESSAGE = Message("completed", "runspec: r1 completed", "all 3 epochs\nnext: finish: destroy")


@pytest.fixture
def hung_port() -> Iterator[int]:
    """A server that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    for conn in held:
        conn.close()
    server.close()


def test_a_hung_endpoint_never_holds_the_finish_up(hung_port: int) -> None:
    said: list[str] = []
    alerts = Alerts([f"json://127.0.0.1:{hung_port}/hook"], said.append)
    started = time.monotonic()
    assert alerts.send_and_wait(MESSAGE, timeout=1.0) is False
    assert time.monotonic() - started < 3.0
    assert said == ['notify: "completed" still not sent after 1s; going on']


def test_nothing_secret_is_shown_and_each_url_fails_on_its_own() -> None:
    token = "s3cr3t-TOKEN-5f4e"
    said: list[str] = []
    alerts = Alerts(
        ["json://127.0.0.1:9/hooks/${HOOK}", "${UNSET_URL}", "nonsense://x"],
        said.append,
        environ={"HOOK": token},
    )
    assert alerts.send_and_wait(MESSAGE, timeout=30) is False
    (line,) = said
    assert line.startswith('notify: "completed" NOT sent (json: ')
    assert "${UNSET_URL} not set in the environment" in line
    assert "nonsense: " in line
    assert token not in line and "127.0.0.1" not in line
    assert getattr(line, "priority", None) == 4  # a warning: the journal files it so


def test_urls_are_expanded_from_the_environment_and_get_timeouts() -> None:
    target = expand("ntfy://${USER_}:${PASS}@ntfy.example/${TOPIC}", {"USER_": "me",
                    "PASS": "hunter2x", "TOPIC": "runs-topic"})  # fmt: skip
    assert target.url == "ntfy://me:hunter2x@ntfy.example/runs-topic"
    assert {"hunter2x", "runs-topic", target.url} <= secrets_of(target, {"PASS": "hunter2x"})
    assert expand("${NOPE}", {}).missing == ["NOPE"]
    assert with_timeouts("json://h/p") == "json://h/p?cto=5&rto=10"
    assert with_timeouts("json://h/p?rto=2") == "json://h/p?rto=2&cto=5"


def test_the_daemon_config_takes_urls_by_the_spec_rules(tmp_path: Path) -> None:
    config = tmp_path / "runspecd.yaml"
    config.write_text("notify: [ntfy://my-topic, '${SLACK_URL}']\n")
    assert load_config(config, state=tmp_path).notify == ("ntfy://my-topic", "${SLACK_URL}")
    config.write_text("notify: ['mailtos://me:hunter2@example.com']\n")
    with pytest.raises(ConfigError, match=r"notify\[0\]: this URL holds a password"):
        load_config(config, state=tmp_path)
    config.write_text("notify: [my-channel]\n")
    with pytest.raises(ConfigError, match="'my-channel' is not a notification URL"):
        load_config(config, state=tmp_path)
