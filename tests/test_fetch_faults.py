"""Reading a run back from the Hub (runspec.push.fetch) when the network fails: every failure
is a PushFailed the callers handle (`--resume` says "cannot resume", `status --hub` shows the
repo as unreadable), never the HTTP client's own exception escaping as a traceback."""

from __future__ import annotations

import pytest

from runspec.push.base import PushFailed
from runspec.push.fetch import Source
from runspec.push.remote import RECORD
from tests.hubserver import HubServer


def test_a_dropped_connection_reading_a_pushed_file_is_a_push_failure(
    hub_server: HubServer,
) -> None:
    hub_server.put_file("me/gone", RECORD, b'{"name": "gone"}', repo_type="model")
    source = Source(hub="me/gone")
    assert source.pin()
    assert source.small(RECORD) == b'{"name": "gone"}'  # the file is there to read
    hub_server.fail("resolve", "drop", times=20)
    with pytest.raises(PushFailed, match=r"read .*record\.json"):
        source.small(RECORD)
