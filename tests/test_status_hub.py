"""`runspec status --hub ORG`: the organisation's runs from the Hub alone, each repo's record
read once per commit (the cache), through the real command and the real client."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.fixtures_run import RUNSPEC, SpecWriter, finish_run, start_run
from tests.hubserver import HubServer


def _status(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNSPEC, "status", "--hub", "me", *extra],
        env={**os.environ, **env}, check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.training
def test_status_hub_lists_two_finished_runs_and_a_second_call_downloads_nothing(
    hub_server: HubServer, hub_env: dict[str, str], write_spec: SpecWriter, tmp_path: Path
) -> None:
    for name in ("fleet-a", "fleet-b"):
        spec = write_spec(
            name, epochs=1, push={"hub": {"repo": f"me/{name}"}, "every": "1h"},
            finish={"action": "none"},
        )  # fmt: skip
        code, out = finish_run(start_run(spec, tmp_path / f"state-{name}", hub_env), timeout=400)
        assert code == 0, out[-4000:]
    # A repo of the same owner that is no run: not listed (no `runspec` tag).
    hub_server.repos[("model", "me/other")] = type(hub_server.repo("me/fleet-a"))(
        "me/other", "model", private=True
    )
    # The watcher (issue 22) ended fleet-b's box: its lease says so beside the record.
    from huggingface_hub import HfApi

    lease = {"vouched_until": "2026-01-01T00:00:00Z",
             "ended_by": {"by": "watch", "reason": "lease expired at 2026-01-01T00:05:00Z",
                          "action": "stop", "at": "2026-01-01T00:06:00Z"}}  # fmt: skip
    HfApi().upload_file(
        path_or_fileobj=json.dumps(lease).encode(), path_in_repo="runspec/lease.json",
        repo_id="me/fleet-b",
    )  # fmt: skip
    env = {**hub_env, "XDG_CACHE_HOME": str(tmp_path / "laptop-cache")}

    before = hub_server.count("resolve")
    done = _status(env, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {row["repo"]: row for row in json.loads(done.stdout)}
    assert set(rows) == {"me/fleet-a", "me/fleet-b"}, rows
    for repo, row in rows.items():
        assert row["state"] == "completed" and row["epoch"] == 1, row
        assert row["last_push"]["final"] is True, row
        assert row["commit"] == hub_server.repo(repo).sha and row["cached"] is False
    assert rows["me/fleet-b"]["stopped_by_watch"].startswith("lease expired")
    assert hub_server.count("resolve") > before

    read = hub_server.count("resolve")
    again = _status(env)
    assert again.returncode == 0, again.stderr
    assert hub_server.count("resolve") == read  # unchanged repos: nothing downloaded
    assert "2 runs of me on the Hub" in again.stdout, again.stdout
    assert "stopped by watch: lease expired at 2026-01-01T00:05:00Z" in again.stdout
    assert "me/fleet-a  completed  epoch 1/1  pushed epoch 1" in again.stdout, again.stdout
