"""The package's shape: no module over 400 lines, and import-linter's contracts
(pyproject.toml's [tool.importlinter], run by `lint-imports` in `make lint`) see an arrow up.

The contracts themselves hold the layers of the stages and keep the child programs off the
parent's side; this file checks that they bite, on a copy of the package with one import added.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "runspec"
MAX_LINES = 400


def test_no_module_over_400_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE.parent)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    program = Path(sys.executable).with_name("lint-imports")
    assert program.exists(), "import-linter comes with the test extra: pip install -e '.[test]'"
    return subprocess.run(
        [str(program), "--no-cache"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("module", "added", "broken"),
    [
        # the store, low in the layers, importing the daemon
        ("store/paths.py", "runspec.daemon.loop", "runspec.store.paths -> runspec.daemon.loop"),
        # the trainer child importing the parent's side, through a lazy import
        ("trainer/child.py", "runspec.run.lifecycle", "runspec.trainer.child -> runspec.run"),
        # the failsafe importing the trainer child
        ("machine/failsafe.py", "runspec.trainer.child", "runspec.machine.failsafe -> runspec"),
    ],
)
def test_the_contracts_see_an_arrow_up(
    tmp_path: Path, module: str, added: str, broken: str
) -> None:
    shutil.copytree(PACKAGE, tmp_path / "runspec", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    with (tmp_path / "runspec" / module).open("a") as fh:
        fh.write(f"\n\ndef _arrow() -> None:\n    import {added}  # noqa\n")
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout
    assert broken in done.stdout
    assert "0 broken" not in done.stdout
