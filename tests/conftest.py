"""Shared fixtures. Each area keeps its own fixtures in `tests/fixtures_<area>.py`; they are
loaded here as plugins, so test modules never import one another."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

pytest_plugins = sorted(f"tests.{p.stem}" for p in Path(__file__).parent.glob("fixtures_*.py"))

REPO = Path(__file__).resolve().parent.parent

# Where the environment says never to write bytecode (this machine's image does), every runspec
# process a test starts (a few hundred `runspec` commands and daemons) would compile runspec's
# own modules from source again; the isolated children (`python -I`) write it anyway.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# Two cores shared by four workers and everything they start: torch's OpenMP pool (one thread
# per core, spinning while it waits) in each trainer, preflight and profile would fight the
# others for them. A spec's own `env:` still wins in the processes it reaches.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# A suite started in the background by a shell without job control (`make test &`, nohup in
# CI) inherits SIGINT ignored, and so would every process it starts: a Ctrl-C sent by a test
# would do nothing. The commands are tested as a terminal starts them.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _no_real_hub(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Nothing in the tests may reach the real Hub or read the developer's stored login."""
    hf_home = tmp_path_factory.getbasetemp() / "hf_home"
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", os.environ.get("HF_HUB_OFFLINE", "0"))
    monkeypatch.setenv(
        "HF_ENDPOINT", "http://127.0.0.1:9"
    )  # a closed port unless a test serves one
    monkeypatch.delenv("HF_TOKEN", raising=False)
