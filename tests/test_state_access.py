"""Another user's state folder (issue 34): `runspec status` and `runspec rm` on root's
/var/lib/runspec, run by someone who cannot read it, say so in one line with the fix (sudo, or
--state), never a traceback, and touch nothing.

"Another user" is played by root without capabilities on a folder owned by another uid, mode
0700: the kernel refuses it exactly as it refuses an ordinary user on root's 0700 folder
(no CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH to pass the mode bits)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NO_CAPS = ("setpriv", "--bounding-set=-all", "--inh-caps=-all", "--")
OWNER = 54321  # no user of this machine: the folder is someone else's


@pytest.fixture
def others_state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    job = state / "jobs" / "kept-run"
    job.mkdir(parents=True)
    (job / "record.json").write_text('{"name": "kept-run"}\n')
    for folder in (state, state / "jobs", job, job / "record.json"):
        os.chown(folder, OWNER, OWNER)
    state.chmod(0o700)
    return state


@pytest.mark.skipif(os.geteuid() != 0, reason="plays another user with root without capabilities")
@pytest.mark.parametrize(
    "argv", [["status"], ["status", "kept-run"], ["rm", "kept-run"], ["status", "--json"]]
)
def test_a_state_folder_it_cannot_read_is_one_line_with_the_fix(
    others_state: Path, argv: list[str]
) -> None:
    result = subprocess.run(
        [*NO_CAPS, sys.executable, "-m", "runspec", *argv, "--state", str(others_state)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    # With --json the error is JSON on standard output (runspec.cli), else one line on stderr.
    json_out = "--json" in argv
    [line] = [json.loads(result.stdout)["message"]] if json_out else result.stderr.splitlines()
    assert f"cannot read the state folder {others_state}" in line
    assert "sudo runspec" in line and "--state" in line
    assert (others_state / "jobs" / "kept-run" / "record.json").exists()
