"""The package's shape, checked so it stays: no import circle, no arrow up from the daemon to
the command line or from a child program to the parent's side, no module over 400 lines.

Every import counts, those inside functions too (they still bind one module to the other);
imports only for type checkers (`if TYPE_CHECKING:`) do not.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "runspec"
MAX_LINES = 400

# The parent's side of the process model: what runs in the daemon or `runspec run`.
PARENT = ("runspec.launcher", "runspec.lifecycle", "runspec.supervise", "runspec.daemon")
CHILDREN = ("runspec.trainer", "runspec.modelbuild", "runspec.preflight", "runspec.curves")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    # The daemon never depends on the command line.
    "runspec.daemon": ("runspec.commands", "runspec.cli"),
    # The child programs depend only on the contract (control), never on the parent's side,
    # and never on each other.
    "runspec.trainer": (*PARENT, "runspec.preflight", "runspec.push", "runspec.endgame"),
    "runspec.modelbuild": (*PARENT, "runspec.preflight", "runspec.trainer"),
    "runspec.preflight": (*PARENT, "runspec.trainer", "runspec.endgame"),
    # The curves' child draws from the run folder alone.
    "runspec.curves": (*PARENT, "runspec.preflight", "runspec.trainer", "runspec.push"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(path: Path, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking_only(node):
            skip.update(id(child) for body in node.body for child in ast.walk(body))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name in known}


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    known = set(files)
    return {name: imports(path, known) - {name} for name, path in files.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_no_import_circle() -> None:
    edges = graph()
    # A package importing its own submodules (push/__init__ -> push.pusher) is no circle
    # unless a submodule imports the package back, which the graph would then show.
    assert cycles(edges) == []


def test_no_forbidden_arrow() -> None:
    bad = [
        f"{source} imports {target}"
        for source, targets in graph().items()
        for origin, banned in FORBIDDEN.items()
        if _under(source, origin)
        for target in targets
        for prefix in banned
        if _under(target, prefix) and not _under(target, origin)
    ]
    assert bad == []


def test_no_module_over_400_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE.parent)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_check_sees_circles_and_arrows() -> None:
    """The checker itself: a circle and a forbidden arrow it must not miss."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    edges = graph()
    assert "runspec.control" in edges["runspec.trainer"]
    assert "runspec.lifecycle" in edges["runspec.daemon.runs"]
