"""Secrets never in a spec or a file made from it (issue 34): a notification URL with its token
written out, or an install URL with a login, is refused before anything is exported, with the
`${NAME}` fix; the same URLs with `${NAME}` pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runspec.spec.loader import check_spec_text
from tests.test_engine_export import INSTALL, SPEC

REPO = Path(__file__).resolve().parent.parent
# Made up, shaped as each service makes them (apprise's plugins' URL templates).
SLACK = "k3Jd9fQ2mZ7pL1xV8nB4cR6t"
DISCORD = "Qw8-eR5tY_uI2oP9aS4dF7gH1jK3lZ6xC0vB-nM8qW5eR2tY7uI4oP1aS9dF3gH6jK0lZ8xC"
TELEGRAM = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
GH = "ghp_8fK2mQ9xL4vT7bN1cR6zW3yH5jD0sA2eG9kP"

LITERAL = [
    f"https://hooks.slack.com/services/T0A1B2C3D/B0E4F5G6H/{SLACK}",
    f"slack://T0A1B2C3D/B0E4F5G6H/{SLACK}/#alerts",
    f"https://discord.com/api/webhooks/112233445566778899/{DISCORD}",
    f"discord://112233445566778899/{DISCORD}",
    f"tgram://{TELEGRAM}/-1001234567",
    "tgram://123:ABC@api.example.org/-1001234567",
    "json://alerts.example.org/runs?token=opensesame",
    f"pover://u{SLACK}@a{SLACK}",
]
WITH_NAMES = [
    "https://hooks.slack.com/services/T0A1B2C3D/B0E4F5G6H/${SLACK_TOKEN}",
    "discord://112233445566778899/${DISCORD_TOKEN}",
    "tgram://${TELEGRAM_BOT}/-1001234567",
    "json://alerts.example.org/runs?token=${ALERT_TOKEN}",
    "${SLACK_URL}",
    "ntfy://my-topic",
    "mailtos://me:${MAIL_PASSWORD}@mail.example.org",
    "json://ec2-54-123-45-67.compute-1.amazonaws.com:8080/runspec-alerts",
]


def _notify(url: str) -> str:
    return SPEC + f"notify:\n  - '{url}'\n"


@pytest.mark.parametrize("url", LITERAL)
def test_a_notification_url_with_its_token_written_out_is_refused(url: str) -> None:
    spec, problems = check_spec_text(_notify(url), "spec.yaml")
    assert spec is None
    [problem] = problems
    assert str(problem).startswith("spec.yaml:")
    assert "/notify/0:" in str(problem) and "${NAME}" in str(problem)
    # The message names what is wrong, never the secret itself.
    secret = url.rsplit("/", 1)[-1]
    assert secret not in str(problem)


@pytest.mark.parametrize("url", WITH_NAMES)
def test_a_notification_url_that_takes_its_token_from_the_environment_passes(url: str) -> None:
    spec, problems = check_spec_text(_notify(url), "spec.yaml")
    assert problems == []
    assert spec is not None and spec.notify == (url,)


def _export(tmp_path: Path, text: str, *argv: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    out = tmp_path / "task.yaml"
    result = subprocess.run(
        [sys.executable, "-m", "runspec", "export", str(spec), "-o", str(out), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "RUNSPEC_INSTALL": INSTALL},
    )
    return result, out


@pytest.mark.parametrize("engine", ["skypilot", "dstack"])
def test_a_webhook_token_never_reaches_an_exported_task(tmp_path: Path, engine: str) -> None:
    result, out = _export(tmp_path, _notify(LITERAL[0]), "--to", engine)
    assert result.returncode == 2, result.stderr
    assert "/notify/0: this URL holds a token in its path" in result.stderr
    assert SLACK not in result.stderr + result.stdout
    assert not out.exists()


@pytest.mark.parametrize(
    "install",
    [
        f"runspec[train] @ git+https://me:{GH}@github.com/me/runspec@v0.1.0",
        f"runspec @ git+https://{GH}@github.com/me/runspec",
        f"https://oauth2:{GH}@gitlab.example.org/me/runspec/-/archive/v1/runspec-v1.tar.gz",
    ],
)
@pytest.mark.parametrize("engine", ["skypilot", "dstack"])
def test_an_install_url_with_a_login_is_refused_before_anything_is_written(
    tmp_path: Path, install: str, engine: str
) -> None:
    result, out = _export(tmp_path, SPEC, "--to", engine, "--install", install)
    assert result.returncode == 2, result.stderr
    assert "carries a login" in result.stderr and "${NAME}" in result.stderr
    assert GH not in result.stderr + result.stdout
    assert not out.exists()
