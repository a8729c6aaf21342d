"""The failsafe's grace test seam (RUNSPEC_TEST_FAILSAFE_GRACE_S): it only ever shortens the
grace, for the tests that wait the failsafe out for real; a value that is not a number from 1 s
to the full grace leaves the full grace."""

from __future__ import annotations

from pathlib import Path

import pytest

from runspec.clock import ManualClock, utc_iso
from runspec.machine import failsafe
from tests.test_finish import Recorder, make_spec, started, systemd_root


def fire_at(tmp_path: Path) -> str | None:
    clock = ManualClock(start=1_800_000_000.0)
    spec = make_spec("{action: destroy, provider: vast, unverified: stop}", name="seam")
    paths, record = started(spec, tmp_path / "state", clock)
    root = systemd_root(tmp_path)
    return failsafe.arm(spec, paths, record, clock=clock, runner=Recorder(), root=root).fire_at


def test_the_seam_shortens_the_grace_after_deadline_plus_overrun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(failsafe.GRACE_ENV, "15")
    # 10 min wall clock + 5 min overrun + the seam's 15 s
    assert fire_at(tmp_path) == utc_iso(1_800_000_000.0 + 600 + 300 + 15)


@pytest.mark.parametrize("value", ["", "soon", "0", "0.5", "-15", "121", "1e9", "nan", "inf"])
def test_a_seam_that_is_not_a_shorter_grace_leaves_the_full_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(failsafe.GRACE_ENV, value)
    assert fire_at(tmp_path) == utc_iso(1_800_000_000.0 + 600 + 300 + failsafe.GRACE_S)
