"""The launcher where systemd runs: the trainer as its own transient unit, in a real systemd
booted in a container (tests/system/harness.py). The process that started it exits at once;
the trainer trains on; a second process re-attaches from trainer.json and stops it."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from runspec.store.paths import RunPaths
from runspec.trainer import control
from runspec.trainer.checkpoints import is_intact
from runspec.trainer.control import TrainJob
from runspec.trainer.launcher import unit_name
from tests.fixtures_system import code_binds
from tests.fixtures_training import tiny_spec, wait_epoch, wait_for
from tests.system.harness import Container, why_unavailable

pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parent.parent

DRIVER = """\
import json, sys
from pathlib import Path
from runspec.trainer.control import TrainJob
from runspec.trainer.launcher import TrainerHandle, start
from runspec.store.paths import RunPaths

state, name, what = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
paths = RunPaths(state=state, name=name, project=state / "runs", data_root=state / "data")
if what == "start":
    handle = start(TrainJob.read(state / "job-in.json"), paths)
    print(json.dumps({"unit": handle.unit, "pid": handle.identity.pid}))
else:
    handle = TrainerHandle.load(paths, log_line=lambda line: print(line, file=sys.stderr))
    assert handle is not None
    was_alive = handle.alive()
    handle.stop(grace_s=300, reason="stopped through the unit")
    result = handle.result()
    print(json.dumps({"was_alive": was_alive, "alive": handle.alive(),
                      "result": None if result is None else result.to_json()}))
"""


@pytest.fixture
def container(tmp_path: Path) -> Iterator[tuple[Container, Path]]:
    reason = why_unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"system tests must run in CI: {reason}")
        pytest.skip(reason)
    state = tmp_path / "state"
    state.mkdir()
    os.chmod(tmp_path, 0o755)
    box = Container(
        tmp_path / "container",
        binds=[(state, state)],
        ro_binds=code_binds(),
    )
    try:
        box.boot()
        yield box, state
    finally:
        box.close()


def _why_not_training(box: Container, name: str, paths: RunPaths) -> str:
    """What a test that waited in vain on the trainer shows: its unit, its journal, its log."""
    unit = unit_name(name)
    status = box.sh(f"systemctl status {unit} --no-pager -l", check=False).stdout
    journal = box.journal_text(unit)[-4000:]
    console = paths.run_dir / "console.log"
    log = console.read_text(errors="replace")[-4000:] if console.exists() else "(no console.log)"
    return f"the trainer never got going\n{status}\n{journal}\n{log}"


def test_the_trainer_runs_as_its_own_unit_and_a_new_handle_stops_it(
    container: tuple[Container, Path], synthetic_data_yaml: Path
) -> None:
    box, state = container
    # The dataset must be visible inside: copy the session's tiny set into the bound state.
    data = state / "data"
    src = synthetic_data_yaml.parent
    for path in src.rglob("*"):
        if path.is_file():
            target = data / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    (data / "data.yaml").write_text(
        (src / "data.yaml").read_text().replace(str(src.resolve()), str(data))
    )
    spec = tiny_spec("unit", epochs=30)
    paths = RunPaths(state=state, name="unit", project=state / "runs", data_root=data)
    TrainJob.from_spec(spec, paths, data / "data.yaml").write(state / "job-in.json")
    (state / "driver.py").write_text(DRIVER)
    python = Path(sys.executable)

    started = box.sh(f"cd {REPO} && {python} {state / 'driver.py'} {state} unit start")
    info = json.loads(started.stdout.strip().splitlines()[-1])
    assert info["unit"] == unit_name("unit")
    # The starter has exited; the trainer is the unit's main process and trains on.
    try:
        wait_epoch(paths, 1)
    except pytest.fail.Exception:
        pytest.fail(_why_not_training(box, "unit", paths))
    shown = box.show(info["unit"], "ActiveState", "MainPID", "Environment")
    assert shown["ActiveState"] == "active"
    assert int(shown["MainPID"]) == info["pid"]
    assert "OMP_NUM_THREADS=1" in shown["Environment"]  # the spec's env; secrets never go here
    trainer = json.loads((paths.job_dir / "trainer.json").read_text())
    assert trainer["unit"] == info["unit"] and trainer["identity"]["pid"] == info["pid"]

    stopped = box.sh(f"cd {REPO} && {python} {state / 'driver.py'} {state} unit stop")
    outcome = json.loads(stopped.stdout.strip().splitlines()[-1])
    assert outcome["was_alive"] and not outcome["alive"], stopped.stderr
    assert outcome["result"]["outcome"] == "stopped"
    assert outcome["result"]["reason"] == "stopped through the unit"
    marker = control.read_epoch_marker(paths.control_dir)
    assert marker is not None and marker.epoch < 30
    assert is_intact(paths.run_dir / "weights" / "last.pt")
    assert (paths.run_dir / "console.log").read_text().count("Checkpoint saved") >= marker.epoch
    # --collect: the finished unit is gone, not left behind as failed.
    gone = box.sh(f"systemctl is-active {info['unit']}", check=False).stdout.strip()
    assert gone in ("inactive", "unknown")


def _holds(path: Path, text: str) -> bool:
    try:
        return text.encode() in path.read_bytes()
    except OSError:
        return False  # gone meanwhile


class HoldingHub:
    """A Hub address that answers nothing: it records each request's head and holds the
    connection open, so a trainer fetching a model from it stays alive, waiting, to be looked
    at. huggingface_hub's first call (agent harnesses, no token) gets a 404 to move it on."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.heads: list[bytes] = []
        self._held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            head = b""
            while b"\r\n\r\n" not in head and (chunk := conn.recv(4096)):
                head += chunk
            if b"agent-harnesses" in head.split(b"\r\n", 1)[0]:
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                conn.close()
                continue
            self.heads.append(head)
            self._held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self._held:
            conn.close()


def test_a_trainer_fetching_a_hub_model_gets_the_token_by_pipe_and_nothing_else(
    container: tuple[Container, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token reaches the trainer's environment (and its Hub request) without ever being in
    a unit property, a command line, or a file; a provider's key does not reach it at all."""
    box, state = container
    token, key = "hf_pipedtoken0123456789abcdef", "vast-key-never-for-the-trainer"
    # In the driver's environment (nsenter and the driver inherit ours), not its command line.
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("CONTAINER_API_KEY", key)
    # The launcher passes its environment on; this machine's CA paths are in /etc, which the
    # container does not have.
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    hub = HoldingHub()
    try:
        spec = tiny_spec("hubmodel", epochs=1, pretrained=True)
        paths = RunPaths(state=state, name="hubmodel", project=state / "runs", data_root=state)
        job = TrainJob.from_spec(spec, paths, state / "data.yaml")
        env = {**job.env, "HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_XET": "1"}
        env.update(HF_HOME=str(state / "hf"), HF_HUB_ETAG_TIMEOUT="300")
        replace(job, model="someorg/private-detector", env=env).write(state / "job-in.json")
        (state / "driver.py").write_text(DRIVER)
        started = box.sh(
            f"cd {REPO} && {sys.executable} {state / 'driver.py'} {state} hubmodel start"
        )
        info = json.loads(started.stdout.strip().splitlines()[-1])
        try:
            wait_for(lambda: hub.heads, timeout=120, what="the trainer's request to the Hub")
        except pytest.fail.Exception:
            pytest.fail(_why_not_training(box, "hubmodel", paths))
        lines = hub.heads[0].decode().split("\r\n")[1:]
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)}
        assert headers.get("authorization") == f"Bearer {token}", hub.heads[0]
        environ = box.sh(f"tr '\\0' '\\n' < /proc/{info['pid']}/environ").stdout.splitlines()
        assert f"HF_TOKEN={token}" in environ
        assert not any(line.startswith("CONTAINER_API_KEY=") for line in environ)
        # Nowhere else: any process's command line (the container's are ours to see too), the
        # unit's properties, its transient file, any file systemd keeps, the trainer's log.
        assert [p for p in Path("/proc").glob("[0-9]*/cmdline") if _holds(p, token)] == []
        unit = info["unit"]
        shown = box.sh(f"systemctl show {unit}; cat /run/systemd/transient/{unit}").stdout
        assert token not in shown
        kept = box.sh(
            'grep -rl --binary-files=text "$1" /run/systemd /etc/systemd /run/credentials; true',
            args=(token,),
        ).stdout
        assert kept == ""
        assert token not in (paths.run_dir / "console.log").read_text()
        box.sh(f"systemctl kill --signal=SIGKILL {unit}")  # it waits on the Hub for ever
    finally:
        hub.close()
