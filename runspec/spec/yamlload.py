"""Read one YAML document the way a run spec needs it read.

PyYAML alone would silently keep the last of two duplicate keys, turn `6:00` into 360 and
`on` into True (YAML 1.1), and happily expand an alias bomb until the machine runs out of
memory. This module composes the node graph with libyaml (fast, and composing does not
expand aliases), then builds plain Python values itself: YAML 1.2 core scalars, a bounded
node count, duplicate keys refused, and the line and column of every key and value kept so
that each problem can point at the text that causes it.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml._yaml import CParser
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from runspec.errors import Problem

MAX_BYTES = 1 << 20  # 1 MiB
MAX_NODES = 100_000  # after alias expansion
MAX_DEPTH = 64  # a spec needs 4; deeper is a mistake or an attack on the stack

KeyPath = tuple[str | int, ...]

_CORE = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_CORE + t for t in ("str", "int", "float", "bool", "null"))
_SEQ, _MAP = _CORE + "seq", _CORE + "map"

# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1023-core-schema), nothing else.
_NULL_RE = re.compile(r"~|null|Null|NULL|")
_BOOL_RE = re.compile(r"true|True|TRUE|false|False|FALSE")
_INT10_RE = re.compile(r"[-+]?[0-9]+")
_INT8_RE = re.compile(r"0o[0-7]+")
_INT16_RE = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT_RE = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_INF_RE = re.compile(r"[-+]?\.(inf|Inf|INF)")
_NAN_RE = re.compile(r"\.(nan|NaN|NAN)")


def core_tag(text: str) -> str:
    """The tag YAML 1.2's core schema gives a plain (unquoted, untagged) scalar."""
    if _NULL_RE.fullmatch(text):
        return _NULL
    if _BOOL_RE.fullmatch(text):
        return _BOOL
    if _INT10_RE.fullmatch(text) or _INT8_RE.fullmatch(text) or _INT16_RE.fullmatch(text):
        return _INT
    if _FLOAT_RE.fullmatch(text) or _INF_RE.fullmatch(text) or _NAN_RE.fullmatch(text):
        return _FLOAT
    return _STR


def _to_int(text: str) -> int:
    if _INT8_RE.fullmatch(text):
        return int(text[2:], 8)
    if _INT16_RE.fullmatch(text):
        return int(text[2:], 16)
    if _INT10_RE.fullmatch(text):
        return int(text, 10)
    raise ValueError(text)


def _to_float(text: str) -> float:
    if _INF_RE.fullmatch(text):
        return -math.inf if text.startswith("-") else math.inf
    if _NAN_RE.fullmatch(text):
        return math.nan
    if _FLOAT_RE.fullmatch(text) or _INT10_RE.fullmatch(text):
        return float(text)
    raise ValueError(text)


def _to_bool(text: str) -> bool:
    if not _BOOL_RE.fullmatch(text):
        raise ValueError(text)
    return text.lower() == "true"


def _to_null(text: str) -> None:
    if not _NULL_RE.fullmatch(text):
        raise ValueError(text)


_SCALARS: dict[str, Callable[[str], Any]] = {
    _STR: str,
    _INT: _to_int,
    _FLOAT: _to_float,
    _BOOL: _to_bool,
    _NULL: _to_null,
}


class _Resolver(yaml.resolver.BaseResolver):
    """Tags plain scalars by the 1.2 core schema instead of PyYAML's 1.1 rules."""

    def resolve(self, kind: type, value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode and implicit[0]:
            return core_tag(value)
        return str(super().resolve(kind, value, implicit))


class _Composer(CParser, _Resolver):
    def __init__(self, text: str) -> None:
        CParser.__init__(self, text)
        _Resolver.__init__(self)


@dataclass(frozen=True)
class Mark:
    line: int  # 1-based
    column: int  # 1-based


def json_pointer(path: KeyPath) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


class Locator:
    """Line and column of a character index, counting only "\n" as a line break.

    libyaml also breaks lines at \r, NEL and U+2028 (YAML 1.1); an editor and YAML 1.2 do
    not, so runspec counts lines itself from libyaml's character index.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def at(self, index: int) -> Mark:
        # The end of the file (where libyaml reports an unexpected end) is shown on the last
        # line, not on the empty one after its final newline.
        index = max(0, min(index, len(self.text)))
        if index == len(self.text) and self.text.endswith("\n"):
            index -= 1
        line = bisect.bisect_right(self.starts, index)
        return Mark(line, index - self.starts[line - 1] + 1)

    def node(self, node: Node) -> Mark:
        return self.at(node.start_mark.index)


@dataclass
class YamlDocument:
    """The plain values of a spec file and where each key and value stands in it."""

    data: dict[str, Any]
    text: str
    # Character indices, turned into lines and columns only for the few that are reported.
    key_index: dict[KeyPath, int] = field(default_factory=dict)
    value_index: dict[KeyPath, int] = field(default_factory=dict)
    # The text of each plain scalar YAML did not read as a string (`08` -> 8), for messages.
    plain_texts: dict[KeyPath, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.locate = Locator(self.text)

    def value_mark(self, path: KeyPath) -> Mark:
        """Where the value at `path` starts; the nearest known ancestor's if it has none."""
        for end in range(len(path), -1, -1):
            index = self.value_index.get(path[:end])
            if index is not None:
                return self.locate.at(index)
        return Mark(1, 1)

    def key_mark(self, path: KeyPath) -> Mark:
        """Where the key naming `path` stands (the value's position for list items)."""
        index = self.key_index.get(path)
        return self.locate.at(index) if index is not None else self.value_mark(path)


class _TooMany(Exception):
    def __init__(self, node: Node) -> None:
        self.node = node


class _TooDeep(Exception):
    def __init__(self, node: Node) -> None:
        self.node = node


class _Builder:
    def __init__(self, source: str, doc: YamlDocument) -> None:
        self.source = source
        self.locate = doc.locate
        self.doc = doc
        self.nodes = 0
        self.problems: list[Problem] = []

    def problem(self, mark: Mark, path: KeyPath, message: str) -> None:
        self.problems.append(
            Problem(self.source, mark.line, mark.column, json_pointer(path), message)
        )

    def build(self, node: Node, path: KeyPath, depth: int) -> Any:
        # Counting every visit, aliases included, is what bounds an expansion bomb: the
        # composed graph is small, only walking it multiplies.
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _TooMany(node)
        if depth > MAX_DEPTH:
            raise _TooDeep(node)
        self.doc.value_index.setdefault(path, node.start_mark.index)
        if isinstance(node, MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, SequenceNode):
            if node.tag != _SEQ:
                self.problem(self.locate.node(node), path, f"unsupported YAML tag {node.tag}")
            return [self.build(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
        value = self._scalar(node, path)
        if not isinstance(value, str):
            self.doc.plain_texts.setdefault(path, node.value)
        return value

    def _scalar(self, node: Node, path: KeyPath) -> Any:
        convert = _SCALARS.get(node.tag)
        if convert is None:
            self.problem(
                self.locate.node(node), path, f"unsupported YAML tag {node.tag}; remove it"
            )
            return node.value
        try:
            return convert(node.value)
        except ValueError:
            tag = node.tag.removeprefix(_CORE)
            self.problem(self.locate.node(node), path, f"{node.value!r} is not a valid !!{tag}")
            return node.value

    def _mapping(self, node: MappingNode, path: KeyPath, depth: int) -> dict[str, Any]:
        if node.tag != _MAP:
            self.problem(self.locate.node(node), path, f"unsupported YAML tag {node.tag}")
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            self.nodes += 1
            if self.nodes > MAX_NODES:
                raise _TooMany(key_node)
            if not isinstance(key_node, ScalarNode):
                self.problem(
                    self.locate.node(key_node),
                    path,
                    "a key must be a plain string, not a list or mapping",
                )
                continue
            key = self._scalar(key_node, path)
            if not isinstance(key, str):
                shown = key_node.value or "null"  # as written: `true`, not Python's True
                self.problem(
                    self.locate.node(key_node),
                    (*path, str(key_node.value)),
                    f"the key {shown} is not a string; quote it: '{key_node.value}'",
                )
                continue
            child = (*path, key)
            if key in result:
                first = self.doc.key_mark(child)
                self.problem(
                    self.locate.node(key_node),
                    child,
                    f"duplicate key {key!r} (first at line {first.line}); "
                    "YAML allows each key once",
                )
                continue
            self.doc.key_index[child] = key_node.start_mark.index
            result[key] = self.build(value_node, child, depth + 1)
        return result


def _end_mark(text: str) -> Mark:
    """Where the character after `text` stands."""
    return Mark(text.count("\n") + 1, len(text) - (text.rfind("\n") + 1) + 1)


def too_big(size: int, source: str) -> Problem:
    message = f"the file is {size:,} bytes; a spec may be at most 1 MiB ({MAX_BYTES:,} bytes)"
    return Problem(source, 1, 1, "", message)


def _decode(raw: bytes | str, source: str) -> tuple[str | None, list[Problem]]:
    size = len(raw.encode("utf-8", "surrogatepass")) if isinstance(raw, str) else len(raw)
    if size > MAX_BYTES:
        return None, [too_big(size, source)]
    if isinstance(raw, str):
        try:
            raw.encode("utf-8")
        except UnicodeEncodeError as exc:  # only a caller's str can hold a lone surrogate
            mark = _end_mark(raw[: exc.start])
            message = f"not UTF-8: U+{ord(raw[exc.start]):04X} is a lone surrogate"
            return None, [Problem(source, mark.line, mark.column, "", message)]
        return raw.removeprefix("\ufeff"), []
    try:
        return raw.decode("utf-8").removeprefix("\ufeff"), []
    except UnicodeDecodeError as exc:
        good = raw[: exc.start].decode("utf-8")
        mark = _end_mark(good)
        byte = raw[exc.start]
        message = f"not UTF-8: byte 0x{byte:02x} cannot be decoded; save the file as UTF-8"
        return None, [Problem(source, mark.line, mark.column, "", message)]


def _yaml_error(exc: yaml.YAMLError, text: str, source: str) -> Problem:
    locate = Locator(text)
    if isinstance(exc, yaml.reader.ReaderError):
        mark = locate.at(exc.position)
        return Problem(source, mark.line, mark.column, "", f"not valid YAML: {exc.reason}")
    if isinstance(exc, yaml.MarkedYAMLError):
        where = exc.problem_mark or exc.context_mark
        mark = locate.at(where.index) if where is not None else Mark(1, 1)
        if exc.context == "expected a single document in the stream":
            message = "the file holds more than one YAML document; a spec is exactly one"
        elif where is not None and text[where.index : where.index + 1] == "\t":
            message = "not valid YAML: a tab cannot indent YAML; use spaces"
        else:
            parts = [p for p in (exc.context, exc.problem) if p]
            message = "not valid YAML: " + ", ".join(parts)
        return Problem(source, mark.line, mark.column, "", message)
    return Problem(source, 1, 1, "", f"not valid YAML: {exc}")


_TOO_MANY = (
    f"the file expands to more than {MAX_NODES:,} YAML nodes (aliases included); "
    "a spec needs a few dozen"
)
_NODE_EVENTS = (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent, yaml.AliasEvent)


def _first_node_past_limit(text: str) -> int | None:
    """The character index of the event that takes the file past MAX_NODES nodes, if any.

    Composing a large flat file costs seconds in PyYAML's resolver calls; counting parser
    events costs a fraction of that and lets a 1 MiB list of numbers be refused quickly.
    Each event is at least one node after expansion, so this never refuses a valid file.
    """
    parser = CParser(text)
    count = 0
    try:
        while (event := parser.get_event()) is not None:
            if isinstance(event, _NODE_EVENTS):
                count += 1
                if count > MAX_NODES:
                    return int(event.start_mark.index) if event.start_mark else 0
            elif isinstance(event, yaml.StreamEndEvent):
                break
    except yaml.YAMLError:
        pass  # composing reports it, with the parser's own position
    finally:
        parser.dispose()
    return None


def load_yaml(raw: bytes | str, source: str) -> tuple[YamlDocument | None, list[Problem]]:
    """Parse a spec file's bytes. The document is None when nothing usable could be read;
    problems that leave the rest readable (duplicate keys, odd keys) come with a document."""
    text, problems = _decode(raw, source)
    if text is None:
        return None, problems
    too_many = _first_node_past_limit(text)
    if too_many is not None:
        mark = Locator(text).at(too_many)
        return None, [Problem(source, mark.line, mark.column, "", _TOO_MANY)]
    composer = _Composer(text)
    try:
        root = composer.get_single_node()
    except yaml.YAMLError as exc:
        return None, [_yaml_error(exc, text, source)]
    finally:
        composer.dispose()
    doc = YamlDocument(data={}, text=text)
    locate = doc.locate
    if root is None:
        return None, [Problem(source, 1, 1, "", "the file is empty; a spec is a YAML mapping")]
    if not isinstance(root, MappingNode):
        kind = "a list" if isinstance(root, SequenceNode) else "a single value"
        mark = locate.node(root)
        message = f"the top level is {kind}; a spec is a mapping (runspec: 1, name: ..., ...)"
        return None, [Problem(source, mark.line, mark.column, "", message)]
    builder = _Builder(source, doc)
    try:
        doc.data = builder.build(root, (), 0)
    except _TooMany as exc:
        mark = locate.node(exc.node)
        return None, [Problem(source, mark.line, mark.column, "", _TOO_MANY)]
    except _TooDeep as exc:
        mark = locate.node(exc.node)
        message = f"values are nested more than {MAX_DEPTH} levels deep"
        return None, [Problem(source, mark.line, mark.column, "", message)]
    return doc, builder.problems
