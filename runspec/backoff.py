"""The one backoff: how long to wait before try number n again, doubling up to a cap.

Every retry of runspec grows its pause the same way (a broken run's next start, a failed
push, a push retried until verified): a flaky network or a full disk that clears is met
quickly, and one that does not is not hammered.
"""

from __future__ import annotations


def pause_after(failures: int, first: float, cap: float) -> float:
    """The pause after the `failures`-th failure in a row (1 for the first): `first`, then
    twice as long each time, never more than `cap`."""
    if failures < 1:
        return 0.0
    # The exponent is bounded: a count in the thousands must not overflow the float.
    return min(cap, first * 2.0 ** min(failures - 1, 60))
