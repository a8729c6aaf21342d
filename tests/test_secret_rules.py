"""The rules behind "secrets only where needed": which names hold secrets (every provider's,
from the registry), when the trainer needs the Hub token, and the log scrubber that keeps
every record, debug ones included, free of them."""

from __future__ import annotations

import ast
import inspect
import logging
import sys

import pytest

from runspec.providers import PROVIDERS
from runspec.secrets import redact
from runspec.secrets.secretenv import (
    SERVICE_VARS,
    child_environ,
    is_hub_model,
    is_secret_name,
    provider_secret_vars,
)


def _env_names_read(cls: type) -> set[str]:
    """Every literal variable name the adapter's module reads through env.get() or _var()."""
    tree = ast.parse(inspect.getsource(sys.modules[cls.__module__]))
    names = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr in ("get", "_var") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
    return names


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_every_adapter_declares_the_secrets_it_reads(name: str) -> None:
    cls = PROVIDERS[name]
    read = {n for n in _env_names_read(cls) if n.isupper() and is_secret_name(n)}
    assert read <= set(cls.secret_env), f"{name} reads {sorted(read - set(cls.secret_env))}"
    assert set(cls.secret_env) <= provider_secret_vars()


def test_a_child_environment_keeps_what_is_not_secret() -> None:
    env = {
        "PATH": "/usr/bin",
        "HF_HOME": "/data/hf",
        "HF_TOKEN_PATH": "/root/.cache/huggingface/token",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_TOKEN": "hf_abcdefgh12345",
        "WANDB_API_KEY": "wandb-secret",
        "NOTIFY_SOCKET": "/run/systemd/notify",
        **{name: "secret" for cls in PROVIDERS.values() for name in cls.secret_env},
    }
    kept = child_environ(env, hub_token=False)
    assert kept == {
        "PATH": "/usr/bin",
        "HF_HOME": "/data/hf",
        "HF_TOKEN_PATH": "/root/.cache/huggingface/token",
        "TOKENIZERS_PARALLELISM": "false",
    }
    assert child_environ(env, hub_token=True)["HF_TOKEN"] == "hf_abcdefgh12345"
    assert "NOTIFY_SOCKET" in SERVICE_VARS


@pytest.mark.parametrize(
    ("ref", "hub"),
    [
        ("yolo9-t", False),
        ("LibreYOLO9s.pt", False),
        ("weights/best.pt", False),
        ("/abs/best.pt", False),
        ("./org/model", False),
        ("someorg/private-detector", True),
        ("hf://someorg/detector@v2/best.pt", True),
        ("https://huggingface.co/org/m/resolve/main/w.pt", True),
        ("https://example.com/w.pt", False),
        (None, False),
    ],
)
def test_which_models_come_from_a_hub_repo(ref: object, hub: bool) -> None:
    assert is_hub_model(ref) is hub


def test_every_log_record_is_scrubbed_debug_and_tracebacks_included(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CONTAINER_API_KEY", "vast-0123456789abcdef")
    monkeypatch.setenv("HF_TOKEN", "hf_scrubme0123456789")
    redact.install()
    redact.install()  # twice is once
    caplog.set_level(logging.DEBUG)
    log = logging.getLogger("some.library")
    log.debug("headers %s", [(b"authorization", b"Bearer sekrit-value-42")])
    log.info("key %s and token %s", "vast-0123456789abcdef", "hf_scrubme0123456789")
    try:
        raise RuntimeError("echoed: Authorization: Bearer hf_other0123456789")
    except RuntimeError:
        log.exception("failed")
    text = caplog.text
    for secret in ("sekrit-value-42", "vast-0123456789abcdef", "hf_scrubme0123456789"):
        assert secret not in text
    assert "hf_other0123456789" not in text and "RuntimeError: echoed" in text
    assert text.count("***") >= 4
    for name in redact.HTTP_LOGGERS:
        assert logging.getLogger(name).getEffectiveLevel() >= logging.INFO
