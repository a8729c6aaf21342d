"""Spec values that reach the clock, the filesystem or a terminal, through the real commands:
bare-number and absurd durations are refused with the fix, and terminal control characters in
a spec's values are shown escaped by `validate`, `run` and `status`, never acted on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures_daemon import REPO, DaemonProc

# Terminal escapes (clear screen, colour, window title), a carriage return and a right-to-left
# override, in values that are valid (a description, a folder) and in one that is not (a key).
HOSTILE = """\
runspec: 1
name: hostile
description: "\\e[2J\\e[31mcleared\\r"
dataset:
  path: "/nonexistent/\\e[31mred\\u202eevil/data.yaml"
train:
  model: yolo9-t
  epochs: 2
  batch: 4
  imgsz: 64
  device: cpu
  args: {pretrained: false, workers: 0}
output:
  project: "runs/\\e]0;title\\a"
budget:
  wall_clock: 10m
preflight: {matmul: false, collective: false, doctor: false}
"""
RAW = (b"\x1b", b"\r", b"\x07", "\u202e".encode())


def _runspec(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "runspec", *args],
        capture_output=True,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


def _no_raw_controls(out: subprocess.CompletedProcess[bytes]) -> None:
    for stream in (out.stdout, out.stderr):
        for raw in RAW:
            assert raw not in stream, (raw, stream.decode(errors="replace"))


def _spec(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_validate_refuses_a_bare_number_with_the_fix(tmp_path: Path) -> None:
    spec = _spec(tmp_path, HOSTILE.replace("wall_clock: 10m", "wall_clock: 6"))
    out = _runspec("validate", str(spec))
    assert out.returncode == 1
    assert (
        out.stdout.decode()
        == f"{spec}:16:15: /budget/wall_clock: 6 has no unit: write 6m, 6h or 6s\n"
    )


def test_run_refuses_an_absurd_wall_clock_before_anything_is_queued(tmp_path: Path) -> None:
    spec = _spec(tmp_path, HOSTILE.replace("wall_clock: 10m", "wall_clock: 1e308"))
    state = tmp_path / "state"
    out = _runspec("run", str(spec), "--state", str(state))
    assert out.returncode == 2, out.stderr.decode()
    assert b"/budget/wall_clock: 1e308 is not a duration" in out.stderr
    assert b"OverflowError" not in out.stderr
    assert not (state / "jobs").exists()  # no record left queued for good


def test_run_refuses_a_duration_past_30_days(tmp_path: Path) -> None:
    spec = _spec(tmp_path, HOSTILE.replace("wall_clock: 10m", "wall_clock: 31d"))
    out = _runspec("run", str(spec), "--state", str(tmp_path / "state"))
    assert out.returncode == 2
    assert b"/budget/wall_clock: '31d' is longer than 30 days" in out.stderr
    assert b"use at most 30d" in out.stderr


def test_run_refuses_a_run_folder_inside_the_state_folders_own(tmp_path: Path) -> None:
    spec = _spec(tmp_path, HOSTILE.replace('project: "runs/\\e]0;title\\a"', "project: jobs"))
    out = _runspec("run", str(spec), "--state", str(tmp_path / "state"))
    assert out.returncode == 2
    assert b"/output/project: 'jobs' is runspec's own jobs/ in the state folder" in out.stderr


def test_validate_shows_control_characters_escaped(tmp_path: Path) -> None:
    spec = _spec(tmp_path, HOSTILE + '"\\e[31mred\\u202Eevil": 1\n', name="bad.yaml")
    out = _runspec("validate", str(spec))
    assert out.returncode == 1
    _no_raw_controls(out)
    assert b"/\\x1b[31mred\\u202eevil: unknown key '\\x1b[31mred\\u202eevil'" in out.stdout
    as_json = _runspec("validate", "--json", str(spec))
    _no_raw_controls(as_json)


def test_run_and_status_show_spec_values_escaped(tmp_path: Path) -> None:
    spec = _spec(tmp_path, HOSTILE)
    state = tmp_path / "state"
    out = _runspec("run", str(spec), "--state", str(state), timeout=240)
    assert out.returncode == 1  # the dataset does not exist: the run fails at staging
    _no_raw_controls(out)
    assert b"/nonexistent/\\x1b[31mred\\u202eevil/data.yaml does not exist" in out.stdout
    status = _runspec("status", "-a", "--state", str(state))
    assert status.returncode == 0
    _no_raw_controls(status)
    # The failed run's reason quotes the spec's dataset path.
    assert b"/nonexistent/\\x1b[31mred\\u202eevil/data.yaml does not exist" in status.stdout
    as_json = _runspec("status", "-a", "--json", "--state", str(state))
    (row,) = json.loads(as_json.stdout)["runs"]
    assert row["run_dir"].endswith("runs/\x1b]0;title\x07/hostile")


def test_daemon_config_durations_need_a_unit_too(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "runspecd.yaml"
    config.write_text("incomplete_wait: 60\n")
    os.chmod(config, 0o600)
    daemon: DaemonProc = make_daemon(config=config).start()
    assert daemon.wait() == 2
    assert "incomplete_wait: 60 has no unit: write 60m, 60h or 60s" in daemon.output
