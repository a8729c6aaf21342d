"""One exit-code rule for every command (the README's table), and --json that stays JSON when
the command fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runspec.cli import COMMANDS, EXIT_CODES
from runspec.errors import Outcome
from tests.fixtures_daemon import REPO, runspec_cli, spec_text


@pytest.fixture
def invalid(tmp_path: Path) -> Path:
    spec = tmp_path / "bad.yaml"
    spec.write_text(spec_text("bad").replace("epochs: 2", "epochs: -3"))
    return spec


@pytest.mark.parametrize("command", ["validate", "submit", "run", "cost", "preflight"])
def test_an_invalid_spec_exits_one_from_validate_and_two_from_every_other_command(
    command: str, invalid: Path, tmp_path: Path
) -> None:
    (tmp_path / "state" / "inbox").mkdir(parents=True)
    state = () if command in ("validate", "cost") else ("--state", str(tmp_path / "state"))
    # validate answers "invalid" as every validator does (1); the others refuse the spec (2).
    code = 1 if command == "validate" else 2
    out = runspec_cli(command, str(invalid), *state)
    assert out.returncode == code, (out.stdout, out.stderr)
    assert "/train/epochs: -3 is less than the minimum of 1" in out.stdout + out.stderr
    assert not (tmp_path / "state" / "jobs").exists()  # nothing was accepted
    # With --json the problems come back as JSON on stdout, the same code.
    as_json = runspec_cli(command, str(invalid), *state, "--json")
    assert as_json.returncode == code
    data = json.loads(as_json.stdout)
    problems = data if isinstance(data, list) else data["problems"]
    assert [p["pointer"] for p in problems] == ["/train/epochs"]


@pytest.mark.parametrize(
    "args",
    [
        ["status", "nope"],
        ["logs", "nope"],
        ["cancel", "nope"],
        ["cost", "/nonexistent/spec.yaml"],
        ["daemon", "--config", "/nonexistent/runspecd.yaml"],
        ["status", "--no-such-option"],  # argparse's own usage error
    ],
    ids=" ".join,
)
def test_json_errors_are_json(args: list[str], tmp_path: Path) -> None:
    out = runspec_cli(*args, "--state", str(tmp_path), "--json")
    assert out.returncode == 2, (out.stdout, out.stderr)
    error = json.loads(out.stdout)
    assert error["error"] == "usage" and error["message"]
    text = runspec_cli(*args, "--state", str(tmp_path))
    assert text.returncode == 2 and text.stdout == "" and text.stderr


def test_every_command_takes_json() -> None:
    for name, _, _ in COMMANDS:
        assert "--json" in runspec_cli(name, "--help").stdout, name


def test_the_rule_in_one_place_matches_the_readme() -> None:
    assert EXIT_CODES == {
        Outcome.OK: 0,
        Outcome.FAILED: 1,
        Outcome.INVALID: 2,
        Outcome.USAGE: 2,
        Outcome.UNVERIFIED: 3,
        Outcome.RETRY: 75,
        Outcome.INTERRUPTED: 130,
    }
    readme = (REPO / "README.md").read_text()
    assert "| 1 | it did it and the answer is a failure: `validate` found an invalid spec" in readme
    assert "| 2 | the command was used wrongly, a file could not be read, or the command" in readme
    assert "| 75 | `run` under an engine only: give the run a fresh machine" in readme
    assert "| 130 | `run`: a second Ctrl-C (SIGINT or SIGTERM) gave the run up at once" in readme
