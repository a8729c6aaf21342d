"""Files written to hurt the validator: each is answered, with located problems, in bounded
time (the timeouts are bounds on a hang, not speed goals; bench/ measures speed)."""

from __future__ import annotations

import pytest

from runspec.spec.loader import check_spec_text
from runspec.spec.schema_errors import MAX_PROBLEMS
from runspec.spec.yamlload import MAX_BYTES, MAX_NODES


@pytest.mark.timeout(30)
def test_a_flat_list_of_a_million_bytes_is_refused_by_its_node_count() -> None:
    text = "a: [" + "1," * ((MAX_BYTES - 10) // 2) + "1]\n"
    assert len(text) <= MAX_BYTES
    spec, problems = check_spec_text(text, "flat.yaml")
    assert spec is None
    assert len(problems) == 1
    assert f"more than {MAX_NODES:,} YAML nodes" in problems[0].message
    assert problems[0].line == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["top", "train", "args", "env"])
def test_thousands_of_bad_keys_are_capped_and_counted(where: str) -> None:
    """The first MAX_PROBLEMS are located, the rest counted (issue 18: every one of them made
    a 2.4 MB .error and held the daemon's loop past its watchdog)."""
    keys = [f"k{i:05d}x" for i in range(20_000)]
    if where == "top":
        text = "".join(f"{k}: v\n" for k in keys)
    elif where == "train":
        text = "train:\n" + "".join(f"  {k}: v\n" for k in keys)
    elif where == "args":
        text = "train:\n  args:\n" + "".join(f"    {k}: v\n" for k in keys)
    else:
        text = "env:\n" + "".join(f"  TOKEN_{k}: v\n" for k in keys)
    spec, problems = check_spec_text(text, "keys.yaml")
    assert spec is None
    located, summary = problems[:-1], problems[-1]
    flagged = {p.pointer.rsplit("/", 1)[-1] for p in located}
    expected = {f"TOKEN_{k}" for k in keys} if where == "env" else set(keys)
    assert len(located) == MAX_PROBLEMS
    assert len(flagged & expected) >= MAX_PROBLEMS - 10  # besides a few missing sections
    assert summary.message.startswith("and ") and "more problems" in summary.message
    assert int(summary.message.split()[1]) >= len(expected) - MAX_PROBLEMS
    lines = text.count("\n")
    assert all(1 <= p.line <= lines for p in problems)
