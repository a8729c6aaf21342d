"""`runspec status --hub ORG`: the organisation's runs from the Hub alone, each repo's record
read once per commit (the cache), through the real command and the real client."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from runspec.push.endconfirm import end_doc
from tests.fixtures_run import RUNSPEC, SpecWriter, finish_run, record_of, start_run
from tests.hubserver import HubServer


def _status(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNSPEC, "status", "--hub", "me", *extra],
        env={**os.environ, **env},
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.training
def test_status_hub_lists_two_finished_runs_and_a_second_call_downloads_nothing(
    hub_server: HubServer, hub_env: dict[str, str], write_spec: SpecWriter, tmp_path: Path
) -> None:
    specs = {}
    for name in ("fleet-a", "fleet-b"):
        spec = specs[name] = write_spec(
            name,
            epochs=1,
            push={"hub": {"repo": f"me/{name}"}, "every": "1h"},
            finish={"action": "none"},
            budget={"wall_clock": "30m", "hourly_cost": 2.5},
        )
        code, out = finish_run(start_run(spec, tmp_path / f"state-{name}", hub_env), timeout=400)
        assert code == 0, out[-4000:]
    # A repo of the same owner that is no run: not listed (no `runspec` tag).
    hub_server.repos[("model", "me/other")] = type(hub_server.repo("me/fleet-a"))(
        "me/other", "model", private=True
    )
    # The watcher (issue 22) ended fleet-b's box: its lease says so beside the record.
    from huggingface_hub import HfApi

    lease = {
        "vouched_until": "2026-01-01T00:00:00Z",
        "ended_by": {
            "by": "watch",
            "reason": "lease expired at 2026-01-01T00:05:00Z",
            "action": "stop",
            "at": "2026-01-01T00:06:00Z",
        },
    }
    HfApi().upload_file(
        path_or_fileobj=json.dumps(lease).encode(),
        path_in_repo="runspec/lease.json",
        repo_id="me/fleet-b",
    )
    # ... and saw its instance stopped: the end's confirmation, as runspec.push.endconfirm
    # writes it (from the watcher: runspec.watch.endedby).
    end = end_doc("fleet-b", "watch", "stop", {"provider": "vast", "instance": "42"}, 0.0)
    HfApi().upload_file(
        path_or_fileobj=json.dumps(end).encode(),
        path_in_repo="runspec/end.json",
        repo_id="me/fleet-b",
    )
    env = {**hub_env, "XDG_CACHE_HOME": str(tmp_path / "laptop-cache")}

    before = hub_server.count("resolve")
    done = _status(env, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    fleet = json.loads(done.stdout)  # one object, as `status --json` is
    assert fleet["org"] == "me" and fleet["count"] == 2 and fleet["under_way"] == 0, fleet
    assert fleet["reason"] is None
    rows = {row["repo"]: row for row in fleet["runs"]}
    assert set(rows) == {"me/fleet-a", "me/fleet-b"}, rows
    assert rows["me/fleet-a"]["end"] is None  # finish: none, nothing to confirm
    assert rows["me/fleet-b"]["end"] == {
        "action": "stop",
        "by": "watch",
        "at": "1970-01-01T00:00:00+00:00",
        "provider": "vast",
        "instance": "42",
        "state": None,
    }
    for repo, row in rows.items():
        assert row["state"] == "completed" and row["epoch"] == 1, row
        # The receipt the final push left says what the run was billed.
        assert row["billed_usd"] is not None and row["billed_usd"] > 0, row
        assert row["last_push"]["final"] is True, row
        assert row["budget_left_s"] is None and row["under_way"] is False, row
        assert row["commit"] == hub_server.repo(repo).sha and row["cached"] is False
    assert rows["me/fleet-b"]["stopped_by_watch"].startswith("lease expired")
    assert hub_server.count("resolve") > before

    read = hub_server.count("resolve")
    again = _status(env)
    assert again.returncode == 0, again.stderr
    assert hub_server.count("resolve") == read  # unchanged repos: nothing downloaded
    assert "2 runs of me on the Hub: 0 under way" in again.stdout, again.stdout
    assert "budget left" not in again.stdout, again.stdout
    assert "stopped by watch: lease expired at 2026-01-01T00:05:00Z" in again.stdout
    assert "me/fleet-a  completed  epoch 1/1  pushed epoch 1" in again.stdout, again.stdout
    assert "stop confirmed by the watch at 1970-01-01T00:00:00+00:00" in again.stdout, again.stdout

    # Issue 38: `runspec rm` frees the name and says what happens to the repo; the same spec
    # run again under it is refused before it trains (its preflight), and its final push of
    # the failed run's files is refused too: the earlier run's weights stay at the head.
    state = tmp_path / "state-fleet-a"
    freed = subprocess.run(
        [*RUNSPEC, "rm", "fleet-a", "--state", str(state)],
        env={**os.environ, **hub_env},
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert freed.returncode == 0, freed.stderr
    assert "its pushes stay in hub me/fleet-a; a new run named fleet-a does not" in freed.stdout
    weights = hub_server.read_file("me/fleet-a", "weights/best.pt")
    code, out = finish_run(start_run(specs["fleet-a"], state, hub_env), timeout=400)
    assert code != 0, out[-4000:]
    assert "holds an earlier run also named 'fleet-a'" in out, out[-4000:]
    again_record = record_of(state, "fleet-a")
    assert again_record["termination"] == "failed-preflight" and again_record["epoch"] == 0
    assert hub_server.read_file("me/fleet-a", "weights/best.pt") == weights


DEEP = b'{"name": "deep", "status": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"


def test_one_hostile_record_is_one_unreadable_row_and_every_other_run_is_listed(
    hub_server: HubServer, hub_env: dict[str, str], tmp_path: Path
) -> None:
    # Records as anyone with write access to a repo of the org could leave them: a state that
    # is no string, JSON nested too deep for the parser, NaN, escapes in what is shown.
    good = {"name": "good", "status": "training", "epoch": 3, "total_epochs": 10}
    hostile = {
        "me/typed": json.dumps({"name": "typed", "status": {"a": [1]}, "epoch": "3"}).encode(),
        "me/deep": DEEP,
        "me/nan": b'{"name": "nan", "status": "training", "cost": {"usd": NaN}}',
        "me/escapes": json.dumps(
            {"name": "\x1b]0;pwned\x07", "status": "training\x1b[2J", "epoch": 1}
        ).encode(),
        "me/good": json.dumps(good).encode(),
    }
    for repo, record in hostile.items():
        hub_server.put_file(repo, "README.md", b"---\ntags:\n- runspec\n---\n", "model")
        hub_server.put_file(repo, "runspec/record.json", record, "model")
    env = {**hub_env, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    shown = _status(env)
    assert shown.returncode == 0, shown.stderr
    assert "5 runs of me on the Hub" in shown.stdout, shown.stdout
    assert "me/good  training  epoch 3/10" in shown.stdout
    for repo in ("me/typed", "me/deep", "me/nan"):
        assert f"{repo}  unreadable record" in shown.stdout, shown.stdout
    assert "\x1b" not in shown.stdout and "training\\x1b[2J" in shown.stdout
    rows = {row["repo"]: row for row in json.loads(_status(env, "--json").stdout)["runs"]}
    assert rows["me/typed"]["state"] == "unreadable record" and rows["me/typed"]["epoch"] is None


def test_a_row_names_the_commit_its_spec_came_from_and_what_it_was_billed() -> None:
    from runspec.views.hubfleet import lines, row

    commit = "a" * 40
    data = {
        "record": {
            "name": "r",
            "status": "finished",
            "termination": "completed",
            "epoch": 3,
            "total_epochs": 3,
            "cost": {"usd": 1.0},
        },
        "provenance": {"via": "follow", "git": {"commit": commit, "path": "specs/r.yaml"}},
        "receipt": {"billed": {"usd": 1.25}},
    }
    shown = row("me/r", "b" * 40, data, 0.0, False)
    assert shown["source"] == {"commit": commit, "path": "specs/r.yaml"}
    assert shown["billed_usd"] == 1.25
    assert "$1.25  from specs/r.yaml@aaaaaaaaaaaa" in lines("me", [shown])[1]
    # What no runspec wrote is shown as nothing, never trusted.
    hostile = {
        **data,
        "provenance": {"git": {"commit": "\x1b[2J", "path": "x"}},
        "receipt": {"billed": {"usd": float("nan")}},
    }
    shown = row("me/r", "b" * 40, hostile, 0.0, False)
    assert shown["source"] is None and shown["billed_usd"] is None
    assert "$1.00" in lines("me", [shown])[1]  # the record's own cost, then


def test_a_run_whose_final_push_carries_its_record_is_counted_ended_with_no_budget_left() -> None:
    from runspec.views.hubfleet import lines, row

    # The record the final push carries: made while the run was `pushing`, its deadline ahead.
    final = {
        "name": "done",
        "status": "pushing",
        "termination": "completed",
        "deadline": "2099-01-01T00:00:00Z",
        "epoch": 3,
        "total_epochs": 3,
        "push": {"epoch": 3, "time": "2026-01-01T00:00:00Z", "final": True},
    }
    going = {**final, "name": "going", "status": "training", "termination": None, "push": None}
    done = row("me/done", "b" * 40, {"record": final}, 0.0, False)
    live = row("me/going", "c" * 40, {"record": going}, 0.0, False)
    assert done["budget_left_s"] is None and done["under_way"] is False
    assert live["budget_left_s"] is not None and live["under_way"] is True
    shown = lines("me", [done, live])
    assert shown[0] == "2 runs of me on the Hub: 1 under way"
    assert "budget left" not in shown[1] and "budget left" in shown[2]


def test_an_end_confirmation_is_shown_as_runspec_wrote_it_and_nothing_else() -> None:
    from runspec.views.hubfleet import fleet_json, lines, row

    record = {"name": "r", "status": "finished", "termination": "completed", "epoch": 3}
    end = end_doc("r", "box", "destroy", {"provider": "vast", "state": "gone"}, 0.0)
    shown = row("me/r", "b" * 40, {"record": record, "end": end}, 0.0, False)
    assert shown["end"] is not None and shown["end"]["state"] == "gone"
    assert lines("me", [shown])[1].endswith(
        "destroy confirmed by the box at 1970-01-01T00:00:00+00:00"
    )
    for hostile in (
        {**end, "confirmed": "yes"},
        {**end, "action": "\x1b[2Jstop"},
        {**end, "by": "someone"},
        {**end, "at": ["now"]},
        ["destroy"],
    ):
        shown = row("me/r", "b" * 40, {"record": record, "end": hostile}, 0.0, False)
        assert shown["end"] is None and "confirmed" not in lines("me", [shown])[1], hostile
    # An org with no run: the object says why its list is empty.
    empty = fleet_json("me", [])
    assert empty["runs"] == [] and empty["reason"] == lines("me", [])[0]
