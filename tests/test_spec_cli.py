"""`runspec validate` and `runspec schema` as a user runs them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from runspec.cli import main

REPO = Path(__file__).resolve().parent.parent
INVALID = REPO / "tests" / "specs" / "invalid"
HEAVY = ("torch", "libreyolo", "huggingface_hub", "apscheduler")


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runspec", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )


def test_valid_examples_exit_zero_and_print_nothing_on_stdout() -> None:
    result = _run("validate", "specs")
    assert (result.returncode, result.stdout) == (0, "")
    count = len(list((REPO / "specs").glob("*.yaml")))
    assert f"{count} specs valid" in result.stderr


def test_an_invalid_spec_exits_one_with_one_line_per_problem() -> None:
    result = _run("validate", "tests/specs/invalid/many_problems.yaml")
    assert result.returncode == 1
    expected = (INVALID / "many_problems.expected").read_text(encoding="utf-8")
    assert result.stdout == expected.replace(
        "many_problems.yaml", "tests/specs/invalid/many_problems.yaml"
    )


@pytest.mark.parametrize("flag", [["--json"], ["--format", "json"]])
def test_json_output_is_the_counts_and_the_problems(
    flag: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(INVALID)
    assert main(["validate", *flag, "train_batch_not_divisible.yaml", "args_unknown.yaml"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert {k: out[k] for k in ("valid", "invalid", "skipped", "unreadable")} == {
        "valid": 0, "invalid": 2, "skipped": 0, "unreadable": 0,
    }  # fmt: skip
    assert out["problems"] == [
        {
            "file": "train_batch_not_divisible.yaml",
            "line": 9,
            "column": 10,
            "pointer": "/train/batch",
            "message": "batch 63 does not divide evenly across 4 GPUs (it is the global batch, "
            "split across them): use a multiple of 4",
        },
        {
            "file": "args_unknown.yaml",
            "line": 9,
            "column": 5,
            "pointer": "/train/args/lr",
            "message": "unknown key 'lr' (did you mean 'lr0'?)",
        },
        {
            "file": "args_unknown.yaml",
            "line": 10,
            "column": 5,
            "pointer": "/train/args/warmup",
            "message": "unknown key 'warmup' (did you mean 'warmup_epochs' or 'warmup_lr_start'?)",
        },
    ]


def test_json_output_of_valid_specs_counts_them_and_has_no_problems(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", "--json", str(REPO / "specs")]) == 0
    out = json.loads(capsys.readouterr().out)
    specs = [p for p in (REPO / "specs").rglob("*.y*ml") if "runspec:" in p.read_text()]
    assert out["valid"] == len(specs) > 0 and out["invalid"] == out["unreadable"] == 0
    assert out["problems"] == []


def test_folders_are_searched_recursively_for_yaml_and_yml(
    spec_file: Callable[..., Path], spec_minimal_text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    good = spec_file(spec_minimal_text, "runs/a/good.yml")
    bad = spec_file(spec_minimal_text.replace("epochs: 3", "epochs: -1"), "runs/b/c/bad.yaml")
    spec_file("not: [a spec", "runs/.hidden/ignored.yaml")
    spec_file("not: [a spec", "runs/notes.txt")
    # YAML that is no spec is skipped when walking a folder, and counted.
    spec_file("path: .\ntrain: images/train\nnames: [a]\n", "runs/b/data.yaml")
    spec_file("on: push\njobs: {}\n", "runs/workflows/ci.yml")
    root = good.parent.parent
    assert main(["validate", "--json", str(root)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["valid"], out["invalid"], out["skipped"]) == (1, 1, 2)
    assert [(p["file"], p["pointer"]) for p in out["problems"]] == [(str(bad), "/train/epochs")]
    assert main(["validate", str(root)]) == 1
    err = capsys.readouterr().err
    assert "1 problem in 1 of 2 specs" in err
    assert "skipped 2 YAML files with no `runspec:` key" in err
    assert main(["validate", str(root / "a")]) == 0
    # Named on the command line, a file is checked whatever it holds.
    assert main(["validate", str(root / "b" / "data.yaml")]) == 1


def test_a_missing_path_is_a_usage_error_and_the_rest_is_still_checked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(
        ["validate", "--json", str(tmp_path / "nope.yaml"), str(INVALID / "yaml_empty.yaml")]
    )
    assert code == 2
    # With --json the missing file is in the JSON too, as a problem with the whole file.
    out = json.loads(capsys.readouterr().out)
    assert (out["unreadable"], out["invalid"], out["valid"]) == (1, 1, 0)
    problems = out["problems"]
    assert [(p["file"], p["pointer"]) for p in problems] == [
        (str(tmp_path / "nope.yaml"), ""),
        (str(INVALID / "yaml_empty.yaml"), ""),
    ]
    assert problems[0]["message"] == "no such file or folder"
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml: no such file or folder" in capsys.readouterr().err


def test_an_unreadable_file_in_a_folder_exits_two(
    tmp_path: Path, spec_minimal_text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "good.yaml").write_text(spec_minimal_text, encoding="utf-8")
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "gone.yaml")
    assert main(["validate", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "cannot read" in captured.err and "dangling.yaml" in captured.err


def test_a_folder_without_specs_is_a_usage_error(tmp_path: Path) -> None:
    assert main(["validate", str(tmp_path)]) == 2


def test_no_path_at_all_is_a_usage_error() -> None:
    result = _run("validate")
    assert result.returncode == 2
    assert "PATH" in result.stderr


def test_validate_imports_nothing_heavy(tmp_path: Path) -> None:
    shutil.copy(REPO / "specs" / "quickstart.yaml", tmp_path / "q.yaml")
    probe = (
        "import sys\n"
        "from runspec.cli import main\n"
        f"code = main(['validate', {str(tmp_path / 'q.yaml')!r}])\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "print(code, heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.stdout.strip() == "0 []", result.stderr


def test_help_imports_nothing_heavy() -> None:
    probe = (
        "import contextlib, io, sys\n"
        "from runspec.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    main(['--help'])\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "print('usage:' in out.getvalue(), heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.stdout.strip() == "True []", result.stderr


def test_schema_command_prints_json_an_editor_can_use() -> None:
    result = _run("schema")
    assert result.returncode == 0
    assert json.loads(result.stdout)["title"].startswith("runspec run spec")


def test_the_pre_commit_hook_validates_the_specs_it_selects() -> None:
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert (hook["id"], hook["language"], hook["types"]) == ("runspec-validate", "python", ["yaml"])
    selected = re.compile(hook["files"])
    assert selected.search("specs/quickstart.yaml")
    assert selected.search("runs/2026/exp1.yaml")
    assert not selected.search("schemas/runspec.schema.json")
    assert not selected.search(".github/workflows/ci.yaml")
    program, *args = hook["entry"].split()
    assert program == "runspec"
    files = sorted(str(p) for p in (REPO / "specs").glob("*.yaml"))
    assert main([*args, *files]) == 0
    assert main([*args, str(INVALID / "name_pattern.yaml")]) == 1
