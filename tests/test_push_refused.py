"""A push the Hub refuses for good (403, 404) is named as such and not retried as an outage;
an outage's retries say their real pause (issue 23)."""

from __future__ import annotations

import pytest

from runspec.push.until import push_until_verified
from tests.fixtures_push import MakeRun
from tests.hubserver import HubServer


@pytest.mark.parametrize("status", [403, 404])
def test_a_refused_final_push_is_said_and_not_tried_again(
    hub_server: HubServer, make_run: MakeRun, status: int
) -> None:
    run = make_run()
    run.epoch(1, best=False)
    hub_server.fail("commit", "echo", status=status, times=1000)
    said: list[str] = []
    pusher = run.pusher()
    pusher.progress = said.append
    # The clock seam moves at once through every pause: an outage would be tried again and
    # again inside this window.
    pushed = push_until_verified(pusher, final=True, timeout=1800.0, clock=run.clock)
    assert pushed is None
    assert hub_server.count("commit") == 1, said
    record = run.reload()
    assert record.push_error is not None
    assert f"refused (HTTP {status}, not an outage" in record.push_error
    assert any(line.startswith("not tried again: ") for line in said), said
    assert not any("retrying in" in line for line in said), said


def test_an_outage_is_retried_saying_the_real_pauses(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    run = make_run()
    run.epoch(1, best=False)
    hub_server.fail("commit", "500", times=3)
    said: list[str] = []
    # The pusher's own scheduled retry is far off: every retry here is the final push's.
    pusher = run.pusher(retry_base=600.0)
    pusher.progress = said.append
    pushed = push_until_verified(pusher, final=True, timeout=1800.0, clock=run.clock)
    assert pushed is not None
    retries = [
        line.split("retrying in ")[1].split(":")[0] for line in said if "retrying in" in line
    ]
    assert retries == ["1s", "2s", "4s"], said
