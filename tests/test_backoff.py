"""The one backoff every retry of runspec shares."""

from __future__ import annotations

from runspec.backoff import pause_after


def test_the_pause_doubles_from_the_first_up_to_the_cap() -> None:
    assert [pause_after(n, 10.0, 600.0) for n in range(1, 9)] == [
        10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 600.0, 600.0
    ]  # fmt: skip


def test_no_failure_no_pause_and_a_huge_count_stays_at_the_cap() -> None:
    assert pause_after(0, 1.0, 30.0) == 0.0
    assert pause_after(10_000, 1.0, 30.0) == 30.0
