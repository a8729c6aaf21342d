"""The launcher where systemd runs: the trainer as its own transient unit, in a real systemd
booted in a container (tests/system/harness.py). The process that started it exits at once;
the trainer trains on; a second process re-attaches from trainer.json and stops it."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runspec import control
from runspec.checkpoints import is_intact
from runspec.control import TrainJob
from runspec.launcher import unit_name
from runspec.paths import RunPaths
from tests.fixtures_system import code_binds
from tests.fixtures_training import tiny_spec, wait_epoch
from tests.system.harness import Container, why_unavailable

pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parent.parent

DRIVER = """\
import json, sys
from pathlib import Path
from runspec.control import TrainJob
from runspec.launcher import TrainerHandle, start
from runspec.paths import RunPaths

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
    wait_epoch(paths, 1)
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
