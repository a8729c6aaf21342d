"""The daemon's config errors say FILE:LINE:COL and a did-you-mean, as a spec's problems do
(issue 23's polish), through the real `runspec daemon --config`."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures_daemon import runspec_cli


def _daemon(tmp_path: Path, text: str) -> str:
    config = tmp_path / "runspecd.yaml"
    config.write_text(text)
    out = runspec_cli("daemon", "--config", str(config), "--state", str(tmp_path / "s"))
    assert out.returncode == 2, out.stdout + out.stderr
    return out.stderr


def test_a_misspelt_key_is_located_with_a_suggestion(tmp_path: Path) -> None:
    err = _daemon(tmp_path, "hourly_cost: 2.5\n  \nidel_finish: 30m\n")
    assert f"{tmp_path / 'runspecd.yaml'}:3:1: unknown key 'idel_finish'" in err, err
    assert "(did you mean 'idle_finish'?)" in err, err


def test_a_bad_value_and_a_yaml_error_are_located(tmp_path: Path) -> None:
    config = tmp_path / "runspecd.yaml"
    err = _daemon(tmp_path, "state: /tmp/x\nrescan_every: soon\n")
    assert f"{config}:2:1: rescan_every:" in err, err
    err = _daemon(tmp_path, "state: [unclosed\n")
    assert f"{config}:" in err and "cannot read config" not in err, err
    err = _daemon(tmp_path, "- a list\n")
    assert f"{config}:1:1: the config must be a mapping" in err, err
