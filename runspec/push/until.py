"""The push that must happen now (an interrupt, the final push): pushed again after a
failure, with a growing pause, until one is verified or its time is up."""

from __future__ import annotations

import threading

from runspec.clock import Clock, human_duration
from runspec.push.pusher import Pusher
from runspec.store.state import PushRecord


def push_until_verified(
    pusher: Pusher,
    *,
    final: bool,
    timeout: float,
    clock: Clock,
    give_up: threading.Event | None = None,
) -> PushRecord | None:
    """Push, and push again after a failure (a dropped connection, a 500 the client gave up
    on), with a growing pause, until one is verified, `timeout` passed or `give_up` is set."""
    end = clock.monotonic() + timeout
    pause = 1.0
    while True:
        left = end - clock.monotonic()
        pushed = pusher.push_now(final=final, timeout=max(left, 1.0))
        if pushed is not None:
            return pushed
        left = end - clock.monotonic()
        if left <= pause or (give_up is not None and give_up.is_set()):
            if not pusher.owner.record.push_error:
                # A slow or hung target raises nothing: say why the push is not verified.
                what = "the final push" if final else "the push"
                pusher.owner.push_failed(
                    f"{what} was not verified within {human_duration(timeout)}: the target "
                    "took it and has not answered (slow or hung)"
                )
            return None
        clock.sleep(pause)
        pause = min(pause * 2, 30.0)
