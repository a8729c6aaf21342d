"""jsonschema's errors as located, plainly worded problems.

One jsonschema error can mean several problems (every unknown key of an object) and its own
wording is Python's (`'x' is not of type 'integer'`); this module words each the way
spec-v1.md shows them and puts it at the key or value the YAML file has for it. A schema may
carry an `errorMessage` (the ajv-errors convention) where the fix is not obvious.
"""

from __future__ import annotations

import difflib
from functools import cache
from typing import Any

from runspec.errors import Problem
from runspec.spec.rules import DURATION_FIELDS
from runspec.spec.yamlload import KeyPath, YamlDocument, json_pointer
from runspec.units import bare_number

_TOP_HINTS = {
    "runspec": "add runspec: 1 (the format version)",
    "name": "the run's id, e.g. name: yolo9s-run1",
    "dataset": "one of hub, path or synthetic",
    "train": "model and epochs at least",
    "budget": "wall_clock at least, e.g. budget: {wall_clock: 6h}",
}
_YAML11_BOOLS = ("yes", "no", "on", "off", "y", "n")
_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def show(value: Any) -> str:
    """A value as the spec writer typed it, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return str(value)


@cache
def _suggestible(choices: tuple[str, ...]) -> tuple[str, ...]:
    # Dashed spellings of underscored keys are aliases, not suggestions.
    return tuple(c for c in choices if "-" not in c or c.replace("-", "_") not in choices)


def did_you_mean(word: str, known: tuple[str, ...]) -> str:
    # A close spelling first; else the keys it starts (`warmup` -> `warmup_epochs`).
    choices = _suggestible(known)
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.75)
    close = close or sorted(c for c in choices if c.startswith(word) and c != word)[:3]
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"


# Problems kept per spec, in every output (the terminal, --json, the inbox's .error): a file
# of 40,000 unknown keys is answered with the first ones and a count, in bounded time and size.
MAX_PROBLEMS = 50


class Reporter:
    """Turns paths and messages into located Problems."""

    def __init__(self, doc: YamlDocument, source: str, spelled: dict[str, str]) -> None:
        self.doc = doc
        self.source = source
        self.spelled = spelled  # train.args keys as the file spells them
        self.problems: list[Problem] = []
        self._seen: set[Problem] = set()  # a file of 40,000 bad keys must not be quadratic
        # Guessing costs a fraction of a millisecond a key; a file of thousands of unknown
        # keys is not a typo, and its answer must still come in seconds.
        self.guesses_left = 200
        self.dropped = 0  # problems past MAX_PROBLEMS: counted, never located or kept

    def _as_written(self, path: KeyPath) -> KeyPath:
        if len(path) >= 3 and path[:2] == ("train", "args") and isinstance(path[2], str):
            return (*path[:2], self.spelled.get(path[2], path[2]), *path[3:])
        return path

    def _keep(self, problem: Problem) -> None:
        if problem not in self._seen:
            self._seen.add(problem)
            self.problems.append(problem)

    def full(self) -> bool:
        if len(self.problems) < MAX_PROBLEMS:
            return False
        self.dropped += 1
        return True

    def add(self, path: KeyPath, message: str, *, at_key: bool = False) -> None:
        if self.full():
            return
        written = self._as_written(path)
        mark = self.doc.key_mark(written) if at_key else self.doc.value_mark(written)
        problem = Problem(self.source, mark.line, mark.column, json_pointer(written), message)
        self._keep(problem)

    def missing(self, parent: KeyPath, key: str, message: str) -> None:
        """A missing key is reported at its parent's line (the parent's key, if it has one)."""
        if self.full():
            return
        mark = self.doc.key_mark(parent)
        pointer = json_pointer((*self._as_written(parent), key))
        problem = Problem(self.source, mark.line, mark.column, pointer, message)
        self._keep(problem)


def _quote_hint(error: Any, report: Reporter) -> str:
    """`name: 08` is the number 8 in YAML 1.2; say so where a string was wanted."""
    wanted = error.validator_value if error.validator == "type" else None
    if wanted != "string" and not (isinstance(wanted, list) and "string" in wanted):
        return ""
    text = report.doc.plain_texts.get(tuple(error.absolute_path))
    if not text:
        return ""
    if text == show(error.instance):
        return f" (quote it for a string: '{text}')"
    return f" (YAML reads {text} as {show(error.instance)}; quote it: '{text}')"


# A section given as one word where a mapping is wanted: the mapping that word belongs in.
_MAPPING_EXAMPLES: dict[KeyPath, str] = {
    ("finish",): "finish: {{action: {value}, provider: vast}}",
    ("push",): "push: {{hub: {{repo: {value}}}}}",
    ("dataset",): "dataset: {{hub: {{repo: {value}, file: data.tar}}}}",
    ("train",): "train: {{model: {value}, epochs: 100}}",
    ("budget",): "budget: {{wall_clock: {value}}}",
}


def _misspelled(key: str, instance: Any, known: tuple[str, ...]) -> bool:
    """Whether an unknown key of `instance` is `key` misspelled (its did-you-mean names it)."""
    if not isinstance(instance, dict) or len(instance) > 200:  # a typo, not a flood of keys
        return False
    unknown = [k for k in instance if isinstance(k, str) and k not in known]
    return any(repr(key) in did_you_mean(k, known) for k in unknown)


def explain(error: Any, report: Reporter) -> None:
    """Add the problems one jsonschema error stands for."""
    path: KeyPath = tuple(error.absolute_path)
    kind = error.validator
    sub = error.schema if isinstance(error.schema, dict) else {}
    custom = sub.get("errorMessage")
    instance = error.instance
    number = isinstance(instance, int | float) and not isinstance(instance, bool)
    if number and path in DURATION_FIELDS and kind in ("type", "anyOf"):
        # A duration written as a bare number: the fix names both units it may have meant.
        report.add(path, bare_number(report.doc.plain_texts.get(path) or show(instance)))
    elif kind == "additionalProperties":
        known = tuple(sub.get("properties", {}))
        for key in instance:
            if key not in known:
                hint = ""
                if report.guesses_left > 0:
                    report.guesses_left -= 1
                    hint = did_you_mean(key, known)
                report.add((*path, key), f"unknown key {key!r}{hint}", at_key=True)
    elif kind == "required":
        known = tuple(sub.get("properties", {}))
        for key in error.validator_value:
            if key in instance or _misspelled(key, instance, known):
                continue  # the unknown key's did-you-mean names it: one line, not two
            if custom:
                message = custom
            elif not path and key in _TOP_HINTS:
                message = f"missing required key {key!r}: {_TOP_HINTS[key]}"
            else:
                message = f"missing required key {key!r}"
            report.missing(path, key, message)
    elif kind == "not" and custom and "required" in error.validator_value:
        for key in error.validator_value["required"]:
            report.add((*path, key), custom, at_key=True)
    elif kind == "oneOf" and isinstance(instance, dict):
        choices = [branch["required"][0] for branch in error.validator_value]
        given = [c for c in choices if c in instance]
        listed = ", ".join(choices[:-1]) + f" or {choices[-1]}"
        if given:
            message = f"give exactly one of {listed}: {' and '.join(given)} are all set"
            if len(given) == 2:
                message = message.replace("are all set", "are both set")
        else:
            message = f"give one of {listed}"
        report.add(path, message, at_key=True)
    elif "propertyNames" in error.relative_schema_path:
        # jsonschema reports a bad key at its object's path, the key itself as the instance.
        report.add(
            (*path, instance),
            f"{instance!r} is not an environment variable name: use letters, digits and '_', "
            "not starting with a digit",
            at_key=True,
        )
    elif custom:
        report.add(path, custom.format(value=show(instance)) + _quote_hint(error, report))
    elif kind == "type":
        wanted = error.validator_value
        names = [_TYPE_NAMES[t] for t in ([wanted] if isinstance(wanted, str) else wanted)]
        hint = ""
        if wanted == "boolean" and isinstance(instance, str) and instance.lower() in _YAML11_BOOLS:
            hint = " (YAML 1.2 reads yes/no/on/off as strings: write true or false)"
        if wanted == "object" and instance is None:
            hint = " (a key with nothing after it is null: write {} for an empty mapping)"
        if wanted == "object" and isinstance(instance, str) and path in _MAPPING_EXAMPLES:
            hint = f" (write it as a mapping: {_MAPPING_EXAMPLES[path].format(value=instance)})"
        hint = hint or _quote_hint(error, report)
        report.add(path, f"expected {' or '.join(names)}, got {show(instance)}{hint}")
    elif kind == "enum":
        choices = [str(c) for c in error.validator_value]
        hint = did_you_mean(instance, tuple(choices)) if isinstance(instance, str) else ""
        report.add(path, f"{show(instance)} is not one of {', '.join(choices)}{hint}")
    elif kind == "minItems":
        report.add(path, "the list is empty; give at least one item")
    elif kind == "minLength":
        report.add(path, "the string is empty")
    elif kind == "const":
        report.add(path, f"{show(instance)} must be {show(error.validator_value)}")
    else:
        report.add(path, error.message)
