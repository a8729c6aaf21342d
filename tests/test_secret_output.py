"""A Hub (or a proxy before it) that echoes the request's headers, the Authorization header
included, in its answer's body and in a response header, never gets the token into anything
runspec shows or keeps: not the terminal, not `runspec -v`'s debug log (the HTTP clients'
header dumps included), not the run's record or any file. For the dataset download (and the
preflight's size probe before it) and for the push, through the real `runspec -v run`."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.hubserver import HubServer

RUNSPEC = [sys.executable, "-m", "runspec", "-v"]


def _tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"path: .\ntrain: images\nval: images\nnames: [a]\n"
        info = tarfile.TarInfo("s/data.yaml")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _run(spec: Path, state: Path, env: dict[str, str]) -> tuple[int, str]:
    proc = subprocess.run(
        [*RUNSPEC, "run", str(spec), "--state", str(state)],
        env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr


def _files_holding(root: Path, secret: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret in p.read_bytes()]


@pytest.mark.parametrize("status", [401, 500])
def test_a_dataset_download_from_an_echoing_hub_never_shows_the_token(
    status: int, hub_server: HubServer, hub_env: dict[str, str], hub_token: str, tmp_path: Path
) -> None:
    hub_server.put_file("org/shapes", "shapes.tar.gz", _tar(), repo_type="dataset")
    if status == 401:
        # Final: every request for the file (the preflight's size probe, the download) is echoed.
        hub_server.fail("resolve", "echo", times=100, status=status)
    else:
        # Retried by the client: the download's first GET is echoed and the retry goes through
        # (the run then fails in training: the tar holds no images).
        hub_server.fail("resolve", "echo", times=1, status=status, method="GET")
    spec = tmp_path / "echo.yaml"
    spec.write_text(
        "runspec: 1\nname: echo\n"
        "dataset:\n  hub: {repo: org/shapes, file: shapes.tar.gz}\n  data: s/data.yaml\n"
        "train: {model: yolo9-t, epochs: 1, device: cpu, args: {pretrained: false}}\n"
        "budget: {wall_clock: 10m}\n"
        "preflight: {matmul: false, collective: false, doctor: false}\nfinish: {action: none}\n"
    )
    state = tmp_path / "state"
    code, out = _run(spec, state, hub_env)
    assert code == 1, out[-3000:]
    assert hub_server.count("resolve", status) >= 1  # the echo did arrive
    assert " INFO runspec.store.state: " in out  # -v was on: the logging format, records and all
    if status == 401:
        # The body quoting the header reached the error message: shown, blanked.
        assert "Bearer ***" in out, out[-3000:]
    assert hub_token not in out
    assert _files_holding(tmp_path, hub_token.encode()) == []


@pytest.mark.training
def test_a_push_to_an_echoing_hub_never_shows_the_token(
    hub_server: HubServer, hub_env: dict[str, str], hub_token: str, tmp_path: Path
) -> None:
    # The first two commits are echoed, one refused (401) and one failed (500); a retry goes
    # through, so the run still ends verified.
    hub_server.fail("commit", "echo", times=1, status=401)
    hub_server.fail("commit", "echo", times=1, status=500)
    spec = tmp_path / "echopush.yaml"
    spec.write_text(
        "runspec: 1\nname: echopush\n"
        "dataset:\n  synthetic: {train: 8, val: 4, imgsz: 64, classes: 3, seed: 0}\n"
        "train:\n  model: yolo9-t\n  epochs: 2\n  batch: 4\n  imgsz: 32\n  device: cpu\n"
        "  save_period: 1\n  args: {pretrained: false, workers: 0, eval_interval: 1, amp: false}\n"
        "push:\n  hub: {repo: me/echopush, private: true}\n  every: 1h\n"
        "budget: {wall_clock: 30m}\npreflight: {doctor: false}\nfinish: {action: none}\n"
        "env: {OMP_NUM_THREADS: 1}\n"
    )
    state = tmp_path / "state"
    code, out = _run(spec, state, hub_env)
    assert code == 0, out[-3000:]
    assert hub_server.count("commit", 401) == 1 and hub_server.count("commit", 500) == 1
    assert "Bearer ***" in out, out[-3000:]
    assert hub_token not in out
    assert _files_holding(tmp_path, hub_token.encode()) == []
    # Nor in what was pushed.
    for path in hub_server.files("me/echopush"):
        assert hub_token.encode() not in hub_server.read_file("me/echopush", path), path
