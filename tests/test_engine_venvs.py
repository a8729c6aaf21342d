"""The engines' cached venvs (tests/engine_venvs.py): built once under a lock however many
workers ask at once, never used half-built, and never skipped under CI=true."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests import engine_venvs


def _fake_build(calls: list[str]) -> object:
    def build(engine: str, folder: Path) -> None:
        calls.append(engine)
        time.sleep(0.5)  # a slow pip: the other worker must wait, not build again
        (folder / "bin").mkdir(parents=True)
        (folder / "bin" / "python").touch()

    return build


def test_two_workers_at_once_build_the_venv_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNSPEC_TEST_ENGINES", str(tmp_path))
    calls: list[str] = []
    monkeypatch.setattr(engine_venvs, "_build", _fake_build(calls))
    found: list[Path] = []
    workers = [
        threading.Thread(target=lambda: found.append(engine_venvs.engine_python("dstack")))
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert calls == ["dstack"]
    assert found == [tmp_path / "dstack-0.22.5" / "bin" / "python"] * 2
    # Cached: a later run builds nothing.
    engine_venvs.engine_python("dstack")
    assert calls == ["dstack"]


def _broken(engine: str, folder: Path) -> None:
    raise subprocess.CalledProcessError(1, ["pip", "install", engine])


def test_a_venv_that_cannot_be_built_skips_and_fails_under_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNSPEC_TEST_ENGINES", str(tmp_path))
    monkeypatch.setattr(engine_venvs, "_build", _broken)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        engine_venvs.validator_python("skypilot")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="cannot build the skypilot venv"):
        engine_venvs.validator_python("skypilot")
    assert not (tmp_path / "skypilot-0.14.1").exists()
