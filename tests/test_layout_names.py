"""The layout's names are spelled in one module each: the state folder's in
runspec.store.paths (its four own folders in runspec.spec.safepaths, the lowest stage, whose
folder rule reads them too), the pushed side's `runspec/*` in runspec.push.remote. A second
spelling is how a layout drifts: one module moves a file and another still looks at the old
place. Docstrings and comments may describe the layout; code may not spell it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "runspec"

# Each name and the one module allowed to spell it as a path.
HOMES = {
    "claimed": "spec/safepaths.py",
    "rejected": "store/paths.py",
    "record.json": "store/paths.py",
    "runspecd.yaml": "store/paths.py",
    "runspec/": "push/remote.py",  # any pushed name under the target's runspec/ folder
}


LOCAL = [name for name in HOMES if name != "runspec/"]
# A pushed file's name: `runspec/<file>` at the start of a path, not /etc/runspec/... here.
PUSHED = re.compile(r"(?<![\w/.-])runspec/[\w.-]+\.\w+")


def _docstrings(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            ids.add(id(first.value))
    return ids


def _path_like(tree: ast.AST) -> set[int]:
    """String constants used as a path part: an operand of `/`, an argument of a join, a
    constant's value (a text with a `/` in it is found by its value). A bare word elsewhere,
    in a tuple of status words say, is not a path."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            ids.update(id(side) for side in (node.left, node.right))
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name in ("join", "joinpath", "Path"):
                ids.update(id(arg) for arg in node.args)
        elif isinstance(node, ast.Assign):  # a name for it: `RECORD = "record.json"`
            ids.add(id(node.value))
    return ids


def spellings(source: str) -> list[tuple[int, str, str]]:
    """(line, name, text) for each path-like spelling of a layout name in `source`."""
    tree = ast.parse(source)
    docs, parts = _docstrings(tree), _path_like(tree)
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        text = node.value
        if id(node) in docs:
            continue
        if PUSHED.search(text):  # a pushed name holds no local one
            found.append((node.lineno, "runspec/", text))
            continue
        if not text or any(c.isspace() for c in text):
            continue  # words to people (a message may name a folder), not a path
        for name in LOCAL:
            if name in text.split("/") and ("/" in text or id(node) in parts):
                found.append((node.lineno, name, text))
    return found


def test_each_layout_name_is_spelled_only_in_its_home_module() -> None:
    strays = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for line, name, text in spellings(path.read_text()):
            if HOMES[name] != rel:
                strays.append(f"runspec/{rel}:{line}: {text!r} (its home is {HOMES[name]})")
    assert not strays, "\n".join(strays)


def test_every_home_spells_its_names() -> None:
    # The check above finds nothing if it finds nothing anywhere: each home must be seen.
    for name, home in HOMES.items():
        found = {n for _, n, _ in spellings((PACKAGE / home).read_text())}
        assert name in found, (name, home)


@pytest.mark.parametrize(
    "code",
    [
        'folder = state / "claimed"',
        'os.path.join(inbox, "rejected")',
        'where = job / "record.json"',
        'RECORD = "record.json"',
        'CONFIG = Path("/etc/runspec/runspecd.yaml")',
        'extras["runspec/record.json"] = record',
        'line = f"see runspec/spec.yaml ({sha})"',
    ],
)
def test_a_stray_spelling_is_seen(code: str) -> None:
    assert spellings(code), code


@pytest.mark.parametrize(
    "code",
    [
        'if row["status"] == "rejected": pass',  # a status word, not the folder
        'WORDS = ("queued", "rejected", "finished")',
        'state = Path("/var/lib/runspec/inbox")',
        'def f():\n    """Reads <state>/claimed/ and record.json."""',
        'log.info("claimed %s", name)',
        'log.info("ignoring %s in claimed/: not a claim", name)',
    ],
)
def test_words_that_are_not_the_layout_are_left_alone(code: str) -> None:
    assert not spellings(code), code
