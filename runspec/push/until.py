"""The push that must happen now (an interrupt, the final push): pushed again after a
failure, with a growing pause (at least until the Hub's commit quota lets a commit through),
until one is verified or its time is up."""

from __future__ import annotations

from collections.abc import Callable

from runspec.backoff import pause_after
from runspec.clock import Clock, human_duration
from runspec.push.pusher import Pusher
from runspec.store.state import PushRecord
from runspec.voice import warning

# How often a wait looks at `give_up`: a second Ctrl-C is answered within this.
WATCH_S = 0.2
FIRST_PAUSE_S = 1.0
MAX_PAUSE_S = 30.0


def push_until_verified(
    pusher: Pusher,
    *,
    final: bool,
    timeout: float,
    clock: Clock,
    give_up: Callable[[], bool] | None = None,
) -> PushRecord | None:
    """Push, and push again after a failure (a dropped connection, a 500 the client gave up
    on), with a growing pause, until one is verified, `timeout` passed or `give_up()` says so
    (asked every WATCH_S, also while a push is in flight)."""
    stop = give_up or (lambda: False)
    end = clock.monotonic() + timeout
    failures = 0
    while True:
        left = end - clock.monotonic()
        pushed = pusher.push_now(final=final, timeout=max(left, 1.0), give_up=stop)
        if pushed is not None:
            return pushed
        failures += 1
        pause = pause_after(failures, FIRST_PAUSE_S, MAX_PAUSE_S)
        if pusher.quota is not None:
            # The Hub's commit quota holds the repo: nothing is sent before it lets go, and
            # when that is after this push's time, waiting for it only bills.
            pause = max(pause, pusher.quota.wait(clock.monotonic(), False))
        left = end - clock.monotonic()
        if pusher.last_permanent:
            pusher.progress(warning(f"not tried again: {pusher.last_failure}"))
            return None
        if left <= pause or stop():
            if not pusher.owner.record.push_error:
                # A slow or hung target raises nothing: say why the push is not verified.
                what = "the final push" if final else "the push"
                pusher.owner.push_failed(
                    f"{what} was not verified within {human_duration(timeout)}: the target "
                    "took it and has not answered (slow or hung)"
                )
            return None
        if pusher.last_failure is not None:
            # The pusher's own line would name its scheduled retry's delay, not this one.
            pusher.progress(
                warning(f"push failed, retrying in {human_duration(pause)}: {pusher.last_failure}")
            )
        wake = clock.monotonic() + pause
        while (rest := wake - clock.monotonic()) > 0 and not stop():
            clock.sleep(min(rest, WATCH_S))
