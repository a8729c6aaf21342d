"""Problems per spec are capped in every output (issue 18, item 7): a spec with tens of
thousands of unknown keys is answered with the first ones and "and M more", so `validate
--json` and the inbox's `.error` stay small."""

from __future__ import annotations

import json
from pathlib import Path

from runspec.spec.schema_errors import MAX_PROBLEMS
from tests.fixtures_daemon import runspec_cli, spec_text

KEYS = 20_000


def _hostile(tmp_path: Path) -> Path:
    spec = tmp_path / "many.yaml"
    spec.write_text(spec_text("many") + "".join(f"bogus{i}: 1\n" for i in range(KEYS)))
    return spec


def test_validate_json_answers_the_first_problems_and_a_count(tmp_path: Path) -> None:
    spec = _hostile(tmp_path)
    out = runspec_cli("validate", str(spec), "--json")
    assert out.returncode == 1  # validate: invalid specs exit 1
    assert len(out.stdout) < 100_000  # 7.3 MB for a 439 KB spec before
    answer = json.loads(out.stdout)
    assert (answer["valid"], answer["invalid"]) == (0, 1)
    problems = json.dumps(answer["problems"])
    assert problems.count("unknown key 'bogus") == MAX_PROBLEMS
    assert f"and {KEYS - MAX_PROBLEMS} more problems" in problems


def test_validate_text_answers_the_first_problems_and_a_count(tmp_path: Path) -> None:
    out = runspec_cli("validate", str(_hostile(tmp_path)))
    assert out.returncode == 1  # validate: invalid specs exit 1
    text = out.stdout + out.stderr
    assert text.count("unknown key 'bogus") == MAX_PROBLEMS
    assert f"and {KEYS - MAX_PROBLEMS} more problems" in text
