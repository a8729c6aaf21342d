"""`runspec plan` for people: text for a terminal, markdown for a pull-request comment.

Every value here came from a spec in a pull request, which anyone may open: text goes through
the printable filter, and markdown escapes what would let a file name or a message close the
table, start a link or inline HTML in the comment.
"""

from __future__ import annotations

import re
from typing import Any

from runspec.clock import human_duration
from runspec.printable import printable


def _bill_words(worst: dict[str, Any] | None, hourly: float | None) -> str:
    if worst is None:
        return "unknown (set budget.hourly_cost)"
    billed = human_duration(worst["billed_seconds"])
    used = human_duration(worst["used_seconds"])
    if worst["provider"] in (None, "unknown"):
        return (
            f"${worst['usd']:.2f} ({used}: wall clock plus overrun at ${hourly:.4f}/h; the "
            "provider found on the box may round it up)"
        )
    rounded = f"billed as {billed}" if billed != used else "billed"
    return (
        f"${worst['usd']:.2f} on {worst['provider']} ({used} {rounded} {worst['increment']}, "
        f"at ${hourly:.4f}/h)"
        if worst["usd"] is not None
        else f"unknown (set budget.hourly_cost); {used} billed as {billed} on {worst['provider']}"
    )


def _epoch_words(epochs: dict[str, Any] | None) -> str | None:
    if epochs is None:
        return None
    each = human_duration(epochs["epoch_seconds"])
    came = f" ({epochs['from']})" if epochs.get("from", "--epoch-time") != "--epoch-time" else ""
    if epochs["fit"] >= epochs["of"]:
        return f"all {epochs['of']} epochs fit at {each} an epoch{came}"
    return f"about {epochs['fit']} of your {epochs['of']} epochs fit at {each} an epoch{came}"


def _problem(p: dict[str, Any]) -> str:
    """As runspec.errors.Problem prints itself: no empty pointer field."""
    where = f"{p['pointer']}: " if p["pointer"] else ""
    return f"{p['file']}:{p['line']}:{p['column']}: {where}{p['message']}"


def _lines(entry: dict[str, Any]) -> list[str]:
    head = entry["file"] + (f": {entry['name']}" if "name" in entry else "")
    if "error" in entry:
        return [f"{head}: cannot plan: {entry['error']}"]
    if not entry["valid"]:
        found = [f"  {_problem(p)}" for p in entry["problems"]]
        return [f"{head}: invalid", *found]
    out = [
        f"{head}: valid",
        f"  worst case: {_bill_words(entry['worst_case_cost'], entry['hourly_cost'])}",
    ]
    if entry["advice"]:
        out.append(f"  {entry['advice']}")
    if (epochs := _epoch_words(entry["epochs"])) is not None:
        out.append(f"  epochs: {epochs}")
    out.append(f"  finish: {entry['finish']['words']}")
    return out


def text(entries: list[dict[str, Any]]) -> str:
    return "".join(printable(line) + "\n" for e in entries for line in _lines(e))


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|<>~])")


def _md(value: object) -> str:
    """One table cell or list item: no newline, no markup of its own."""
    flat = " ".join(printable(str(value)).split())
    return _MD_SPECIAL.sub(r"\\\1", flat)


def markdown(entries: list[dict[str, Any]]) -> str:
    bad = sum(not e["valid"] for e in entries)
    verdict = f"{bad} of {len(entries)} invalid" if bad else f"{len(entries)} valid"
    rows = [
        "### runspec plan: " + verdict,
        "",
        "| spec | valid | worst case | epochs | finish |",
        "|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for e in entries:
        name = _md(e["file"]) + (f" ({_md(e['name'])})" if "name" in e else "")
        if not e["valid"]:
            rows.append(f"| {name} | no | | | |")
            why = [e["error"]] if "error" in e else [_problem(p) for p in e["problems"]]
            notes += [f"- {_md(w)}" for w in why]
            continue
        worst = _md(_bill_words(e["worst_case_cost"], e["hourly_cost"]))
        epochs = _md(_epoch_words(e["epochs"]) or "")
        rows.append(f"| {name} | yes | {worst} | {epochs} | {_md(e['finish']['words'])} |")
        if e["advice"]:
            notes.append(f"- {_md(e['name'])}: {_md(e['advice'])}")
    return "\n".join([*rows, "", *notes]).rstrip() + "\n"
