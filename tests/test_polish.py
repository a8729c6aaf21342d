"""Issue 23's polish, each through the command a person types where there is one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runspec.views.report import summary_weights

RUNSPEC = [sys.executable, "-m", "runspec"]


def _runspec(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNSPEC, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_runspec_alone_prints_the_help() -> None:
    out = _runspec()
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: runspec") and "COMMAND" in out.stdout
    assert "the following arguments are required" not in out.stderr


def test_cuda_n_is_a_device_and_a_bare_duration_suggests_minutes(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    body = "runspec: 1\nname: dev\ndataset: {synthetic: {}}\n"
    spec.write_text(body + "train: {model: yolo9-t, epochs: 3, device: cuda:1}\n"
                    "budget: {wall_clock: 10m}\n")  # fmt: skip
    ok = _runspec("validate", str(spec))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    spec.write_text(body + "train: {model: yolo9-t, epochs: 3}\nbudget: {wall_clock: 90}\n")
    bare = _runspec("validate", str(spec))
    assert bare.returncode == 1
    assert "90 has no unit: write 90m, 90h or 90s" in bare.stdout + bare.stderr


def test_checkpoints_are_listed_in_natural_order() -> None:
    files = ["weights/epoch_10.pt", "weights/last.pt", "weights/epoch_2.pt", "weights/best.pt"]
    assert summary_weights(files) == " (best.pt, epoch_2.pt, epoch_10.pt, last.pt)"


def test_install_refuses_a_root_that_is_not_there_and_names_the_next_command(
    tmp_path: Path,
) -> None:
    missing = _runspec("install", "--root", str(tmp_path / "no-such-root"))
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "is not a folder" in missing.stderr
    assert not (tmp_path / "no-such-root").exists()
    runspec = Path(sys.executable).with_name("runspec")
    done = _runspec("install", "--root", str(tmp_path), "--exec", str(runspec))
    assert done.returncode == 0, done.stderr
    assert f"next: systemctl --root={tmp_path} enable runspecd" in done.stdout
