"""The folders of example specs: each invalid one reports exactly its `.expected` lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from runspec.errors import SpecInvalid
from runspec.spec.loader import check_spec_file, load_spec

CASES = Path(__file__).resolve().parent / "specs"
INVALID = sorted((CASES / "invalid").glob("*.yaml"))
VALID = sorted((CASES / "valid").glob("*.yaml"))
EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "specs").glob("*.yaml"))


def _lines_in(path: Path) -> int:
    return path.read_bytes().count(b"\n") + 1


def test_the_folders_hold_enough_cases() -> None:
    assert len(INVALID) >= 45
    assert len(VALID) >= 4
    assert {p.stem for p in INVALID} == {p.stem for p in (CASES / "invalid").glob("*.expected")}, (
        "every invalid case needs its .expected file, and every .expected a case"
    )


@pytest.mark.timeout(30)  # the alias bombs must be answered, not expanded
@pytest.mark.parametrize("case", INVALID, ids=lambda p: p.stem)
def test_invalid_spec_reports_exactly_the_expected_lines(
    case: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(case.parent)
    expected = case.with_suffix(".expected").read_text(encoding="utf-8").splitlines()
    problems = check_spec_file(Path(case.name))
    assert [str(p) for p in problems] == expected
    for problem in problems:
        assert 1 <= problem.line <= _lines_in(case)
        assert problem.column >= 1
    with pytest.raises(SpecInvalid) as raised:
        load_spec(Path(case.name))
    assert raised.value.problems == problems


@pytest.mark.parametrize("case", VALID + EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_valid_spec_loads(case: Path) -> None:
    assert check_spec_file(case) == []
    spec = load_spec(case)
    assert spec.source == str(case)
    assert spec.text.encode("utf-8") in case.read_bytes()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_examples_point_editors_at_the_schema(example: Path) -> None:
    first = example.read_text(encoding="utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=../schemas/runspec.schema.json"
    assert (example.parent / "../schemas/runspec.schema.json").resolve().is_file()


def test_the_four_promised_examples_exist() -> None:
    assert {p.stem for p in EXAMPLES} >= {
        "quickstart",
        "single-gpu-vast",
        "multi-gpu-4x",
        "long-run-auto",
    }
