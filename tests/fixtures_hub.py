"""Fixtures for anything that talks to the Hub: a local Hub server and the client's env.

`hub_server` starts `tests.hubserver.HubServer` on a free port of 127.0.0.1 and points the
real huggingface_hub client at it: HF_ENDPOINT, a fake HF_TOKEN the server requires as a
Bearer token, HF_HUB_DISABLE_XET=1 and a per-test HF_HOME. huggingface_hub reads some of
these at import time, so where it is already imported its constants are patched too; code
that builds `HfApi(endpoint=os.environ.get("HF_ENDPOINT"))` at call time works either way.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hubserver import HubServer


@pytest.fixture
def hub_token() -> str:
    return f"hf_test{secrets.token_hex(16)}"


@pytest.fixture
def hub_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub_token: str
) -> Iterator[HubServer]:
    server = HubServer(tmp_path / "hub-storage", token=hub_token).start()
    hf_home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_TOKEN", hub_token)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        monkeypatch.setattr(constants, "ENDPOINT", server.url)
        monkeypatch.setattr(
            constants,
            "HUGGINGFACE_CO_URL_TEMPLATE",
            server.url + "/{repo_id}/resolve/{revision}/{filename}",
        )
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "HF_HOME", str(hf_home))
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hf_home / "hub"))
        monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(hf_home / "token"))
        monkeypatch.setattr(
            constants, "AGENT_HARNESSES_PATH", str(hf_home / ".agent_harnesses.json")
        )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def xet_on(hub_server: HubServer, monkeypatch: pytest.MonkeyPatch) -> HubServer:
    """`hub_server` with the Xet path on, at both ends, as on a rented box: the server serves
    the Xet token routes and xet-core's own content store (tests/hubxet.py), and the real
    client (hf_xet installed, HF_HUB_DISABLE_XET unset) uploads and downloads through it."""
    hub_server.enable_xet()
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "0")
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)
    return hub_server


@pytest.fixture
def hub_env(hub_server: HubServer, hub_token: str) -> dict[str, str]:
    """The environment a child process needs to reach `hub_server` (merge into os.environ)."""
    return {
        "HF_ENDPOINT": hub_server.url,
        "HF_TOKEN": hub_token,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HOME": str(Path(hub_server.storage).parent / "hf-home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_OFFLINE": "0",
    }


@pytest.fixture
def xet_env(xet_on: HubServer, hub_env: dict[str, str]) -> dict[str, str]:
    """`hub_env` for a child process that pushes through Xet, as on a rented box."""
    return {**hub_env, "HF_HUB_DISABLE_XET": "0"}
