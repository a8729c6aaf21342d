"""The daemon follows a git repository (a real bare one, `file://`, and a real daemon): each
committed spec blob is queued once, whatever restarts; a broken spec is reported with its
position and runs nothing; a spec deleted while its run trains cancels it, pushed."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runspec.daemon.config import ConfigError, load_config
from runspec.daemon.gitmirror import _environ
from runspec.views.followview import read_status
from tests.fixtures_daemon import DaemonProc, runspec_cli, spec_text, wait_until
from tests.test_daemon_runs import TRAIN_BOUND, tiny

BOUND = 120.0


class Upstream:
    """A bare repository on this machine and a clone that commits and pushes to it."""

    def __init__(self, tmp: Path) -> None:
        self.bare = tmp / "experiments.git"
        self.work = tmp / "checkout"
        self._git("init", "-q", "--bare", "-b", "main", str(self.bare), cwd=tmp)
        self._git("clone", "-q", str(self.bare), str(self.work), cwd=tmp)
        for key, value in (("user.email", "ada@example.invalid"), ("user.name", "Ada")):
            self._git("config", key, value)
        self._git("checkout", "-q", "-b", "main")

    def _git(self, *args: str, cwd: Path | None = None) -> str:
        out = subprocess.run(
            ["git", *args], cwd=cwd or self.work, capture_output=True, text=True, check=True
        )
        return out.stdout.strip()

    @property
    def url(self) -> str:
        return f"file://{self.bare}"

    def commit(self, message: str, files: dict[str, str | None]) -> str:
        for rel, text in files.items():
            path = self.work / rel
            if text is None:
                self._git("rm", "-q", rel)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            self._git("add", rel)
        self._git("commit", "-q", "-m", message)
        self._git("push", "-q", "origin", "main")
        return self._git("rev-parse", "HEAD")

    def blob(self, rel: str) -> str:
        return self._git("rev-parse", f"HEAD:{rel}")


def _config(tmp: Path, upstream: Upstream, every: str = "10s") -> Path:
    config = tmp / "runspecd.yaml"
    config.write_text(
        f"follow:\n  - repo: {upstream.url}\n    branch: main\n    path: specs\n"
        f"    every: {every}\n"
    )
    return config


def _jobs(state: Path) -> list[str]:
    return sorted(p.name for p in (state / "jobs").iterdir()) if (state / "jobs").is_dir() else []


def _provenance(state: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((state / "jobs" / name / "provenance.json").read_text())
    return data


def _read_at(state: Path) -> str:
    return "".join(
        str(s.get("read_at")) + str(s.get("commit")) for s in read_status(state).values()
    )


def _started_until_queued(make_daemon: Any, config: Path, name: str) -> DaemonProc:
    """A daemon following `config`'s repository, once it took the spec `name` from it."""
    daemon: DaemonProc = make_daemon(config)
    daemon.start()
    daemon.wait_ready()
    accepted = daemon.state / "jobs" / name / "provenance.json"
    wait_until(accepted.exists, timeout=BOUND, what=f"the run of {name}")
    return daemon


def _next_read(daemon: DaemonProc) -> None:
    """SIGHUP re-reads the config and every followed branch at once; wait for that read."""
    before = _read_at(daemon.state)
    daemon.signal(signal.SIGHUP)
    wait_until(lambda: _read_at(daemon.state) != before, timeout=BOUND, what="the next read")


def test_each_committed_spec_runs_once_across_commits_and_restarts(
    tmp_path: Path, make_daemon: Any
) -> None:
    upstream = Upstream(tmp_path)
    commit = upstream.commit("one: a first try", {"specs/one.yaml": spec_text("one")})
    blob = upstream.blob("specs/one.yaml")
    config = _config(tmp_path, upstream)
    daemon = _started_until_queued(make_daemon, config, "one")
    git = _provenance(daemon.state, "one")["git"]
    assert git["commit"] == commit and git["blob"] == blob and git["path"] == "specs/one.yaml"
    assert git["author"] == "Ada <ada@example.invalid>" and git["subject"] == "one: a first try"
    assert git["dirty"] is False and git["remote"] == upstream.url
    assert "follow: queued one from" in daemon.output

    # An unrelated commit, then a restart: nothing runs again.
    upstream.commit("docs", {"README.md": "experiments\n"})
    _next_read(daemon)
    assert daemon.stop() == 0
    again: DaemonProc = make_daemon(config)
    again.start()
    again.wait_ready()
    _next_read(again)
    assert _jobs(again.state) == ["one"]
    assert again.output.count("follow: queued") == 0

    # A second spec committed later runs; a broken one is reported with its position.
    broken = spec_text("three").replace("  epochs: 2\n", "  epochs: two\n")
    upstream.commit(
        "two and three", {"specs/two.yaml": spec_text("two"), "specs/three.yaml": broken}
    )
    _next_read(again)
    wait_until(lambda: "two" in _jobs(again.state), timeout=BOUND, what="the run of two")
    assert "three" not in _jobs(again.state)
    where = f"{upstream.url}@main:specs/three.yaml:7:"
    assert f"follow: refused, nothing runs: {where}" in again.output
    status = runspec_cli("status", "--state", str(again.state), "--inbox", str(again.inbox))
    assert where in status.stdout and "following" in status.stdout, status.stdout
    _next_read(again)
    assert again.output.count("refused, nothing runs") == 1  # said once, not every read


@pytest.mark.training
@pytest.mark.timeout(900)
def test_a_spec_deleted_while_its_run_trains_cancels_it_pushed(
    tmp_path: Path, make_daemon: Any
) -> None:
    upstream = Upstream(tmp_path)
    added = upstream.commit("long run", {"specs/long.yaml": tiny("long", 50)})
    blob = upstream.blob("specs/long.yaml")
    daemon: DaemonProc = make_daemon(_config(tmp_path, upstream))
    daemon.start()
    daemon.wait_ready()

    def epoch() -> int:
        try:
            record = json.loads((daemon.state / "jobs/long/record.json").read_text())
        except (OSError, ValueError):
            return 0
        return int(record.get("epoch") or 0)

    wait_until(lambda: epoch() >= 1, timeout=TRAIN_BOUND, what="the first epoch")
    gone = upstream.commit("drop the long run", {"specs/long.yaml": None})
    _next_read(daemon)
    assert f"follow: specs/long.yaml was deleted at {gone[:12]}: cancelling long" in daemon.output
    record_file = daemon.state / "jobs/long/record.json"
    wait_until(
        lambda: json.loads(record_file.read_text()).get("status") == "finished",
        timeout=TRAIN_BOUND,
        what="the cancelled run's end",
    )
    record = json.loads(record_file.read_text())
    assert record["termination"] == "cancelled" and record["epoch"] < 50
    assert record["last_push"]["final"] is True and record["last_push"]["epoch"] == record["epoch"]
    assert record["finish"] == {}  # the machine is kept

    # The receipt, beside the weights it describes, names the commit and the blob that ran.
    pushed = daemon.state / "pushed" / "long"
    receipt = json.loads((pushed / "runspec" / "receipt.json").read_text())
    assert receipt["source"]["commit"] == added and receipt["source"]["blob"] == blob
    assert receipt["source"]["path"] == "specs/long.yaml" and receipt["source"]["dirty"] is False
    assert receipt["source"]["via"] == "follow" and receipt["run"] == "long"
    weights = {w["path"]: w["sha256"] for w in receipt["weights"]}
    assert (
        weights["weights/last.pt"]
        == hashlib.sha256((pushed / "weights" / "last.pt").read_bytes()).hexdigest()
    )
    assert receipt["epoch"] == record["epoch"]
    assert receipt["budget"]["started_at"] == record["started_at"]
    assert receipt["budget"]["used_seconds"] > 0
    assert receipt["billed"]["usd"] > 0  # at the spec's hourly cost, no provider named
    assert receipt["finish"]["action"] == "none"
    assert receipt["versions"]["libreyolo"] and receipt["versions"]["torch"]


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("repo: https://me:ghp_x@github.com/a/b.git", "RUNSPEC_GIT_TOKEN"),
        ("repo: ftp://example.invalid/a.git", "use https://"),
        ("repo: https://github.com/a/b.git\n    branch: ../main", "not a branch name"),
        ("repo: https://github.com/a/b.git\n    path: ../etc", "a folder in the repo"),
        ("repo: https://github.com/a/b.git\n    evry: 1m", "did you mean 'every'"),
        ("repo: https://github.com/a/b.git\n    every: 1s", "at least 10s"),
    ],
)
def test_a_follow_entry_is_checked_before_any_git_runs(
    tmp_path: Path, entry: str, says: str
) -> None:
    config = tmp_path / "runspecd.yaml"
    config.write_text(f"follow:\n  - {entry}\n")
    with pytest.raises(ConfigError, match=says):
        load_config(config, state=tmp_path / "state")


def test_git_runs_with_the_token_in_its_environment_never_its_command_line() -> None:
    env = _environ("https://github.com/a/b.git", {"PATH": "/usr/bin", "RUNSPEC_GIT_TOKEN": "t0k"})
    headers = [v for k, v in env.items() if k.startswith("GIT_CONFIG_VALUE_")]
    assert any(v.startswith("Authorization: Basic ") for v in headers)
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert "t0k" not in " ".join(env.values())  # base64 in a header, and only there
    # An ssh remote never gets the token as a header.
    ssh = _environ("ssh://git@github.com/a/b.git", {"RUNSPEC_GIT_TOKEN": "t0k"})
    assert not any(v.startswith("Authorization") for v in ssh.values())


def test_a_second_box_following_the_same_branch_never_runs_a_claimed_blob(
    tmp_path: Path, make_daemon: Any
) -> None:
    """The claim sits at the run's push target (here a shared push folder): a daemon with a
    state folder of its own (a second box, or a fresh disk) reads it and runs nothing."""
    upstream = Upstream(tmp_path)
    shared = tmp_path / "volume"
    text = spec_text("once", extra=f"push:\n  dir: {shared}\n")
    upstream.commit("once", {"specs/once.yaml": text})
    config = _config(tmp_path, upstream)
    first: DaemonProc = make_daemon(config)
    first.start()
    first.wait_ready()
    wait_until(lambda: "once" in _jobs(first.state), timeout=BOUND, what="the run of once")
    claims = list((shared / "once" / "runspec" / "claims").glob("*.json"))
    assert len(claims) == 1 and json.loads(claims[0].read_text())["path"] == "specs/once.yaml"
    assert first.stop() == 0

    other_state, other_inbox = tmp_path / "box2", tmp_path / "box2-inbox"
    other_state.mkdir(mode=0o700)
    other_inbox.mkdir(mode=0o700)
    second: DaemonProc = make_daemon(config, state=other_state)
    second.inbox = other_inbox
    second.start()
    second.wait_ready()
    wait_until(lambda: "not running once" in second.output, timeout=BOUND, what="the claim read")
    assert "claimed already at" in second.output and "by another box" in second.output
    assert _jobs(other_state) == [] and list(other_inbox.iterdir()) == []


def test_a_claim_at_the_hub_is_made_once_across_boxes(
    tmp_path: Path, hub_server: Any, write_spec: Any
) -> None:
    from runspec.daemon.followclaim import claim
    from runspec.spec.loader import load_spec

    spec = load_spec(write_spec("claimed", push={"hub": {"repo": "me/claimed"}}))
    body = {
        "repo": "file:///x.git",
        "path": "specs/a.yaml",
        "blob": "b" * 40,
        "commit": "c" * 40,
        "at": "2026-12-03T00:00:00Z",
    }
    assert claim(spec, tmp_path / "box1", body) is None  # made, on a repo it had to create
    assert claim(spec, tmp_path / "box1", body) is None  # the same box, after a restart
    other = claim(spec, tmp_path / "box2", body)
    assert other is not None and "claimed already at 2026-12-03T00:00:00Z" in other
    assert claim(spec, tmp_path / "box2", {**body, "blob": "d" * 40}) is None  # a new blob
    files = hub_server.files("me/claimed")
    assert len([f for f in files if f.startswith("runspec/claims/")]) == 2


def _follower(tmp: Path, upstream: Upstream, said: list[str]) -> Any:
    from runspec.clock import ManualClock
    from runspec.daemon.follow import Follower
    from runspec.daemon.followspec import FollowSpec

    state, inbox = tmp / "state", tmp / "inbox"
    for folder in (state, inbox):
        folder.mkdir(mode=0o700, exist_ok=True)
    follow = FollowSpec(upstream.url, "main", "specs", 60.0)
    return Follower((follow,), state, inbox, ManualClock(), said.append), follow


def _taken(inbox: Path) -> list[str]:
    """What the follower dropped into the inbox, taken away as the daemon's intake would."""
    names = sorted(p.name for p in inbox.iterdir() if p.suffix == ".yaml")
    for path in inbox.iterdir():
        path.unlink()
    return names


def test_the_ledger_keeps_its_newest_entries_and_a_forgotten_blob_never_runs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("runspec.daemon.follow.LEDGER_KEEP", 2)
    upstream = Upstream(tmp_path)
    shared = tmp_path / "volume"

    def pushed(name: str) -> str:
        return spec_text(name, extra=f"push:\n  dir: {shared}\n")

    said: list[str] = []
    follower, follow = _follower(tmp_path, upstream, said)
    upstream.commit("a, and n with no push target", {"specs/a.yaml": pushed("a")})
    upstream.commit("n", {"specs/n.yaml": spec_text("n")})
    follower.poll(follow)
    assert _taken(follower.inbox) == ["a.yaml", "n.yaml"]
    previous = "a"
    for name in ("b", "c", "d"):
        follower.clock.advance(60)
        upstream.commit(name, {f"specs/{previous}.yaml": None, f"specs/{name}.yaml": pushed(name)})
        follower.poll(follow)
        assert _taken(follower.inbox) == [f"{name}.yaml"]
        previous = name
    ledger = json.loads((follower.state / "follow" / "ledger.json").read_text())
    paths = sorted(key.split("\0")[1] for key in ledger["blobs"])
    # d is on the branch, n has no other record that it ran: both kept; a, b and c forgotten.
    assert paths == ["specs/d.yaml", "specs/n.yaml"], paths

    # a comes back (a revert to its old blob): its claim at the push target says it ran.
    upstream.commit("revert to a", {"specs/a.yaml": pushed("a")})
    follower.poll(follow)
    assert _taken(follower.inbox) == []
    assert any(
        "not running a from" in line and "ran already from this box" in line for line in said
    )


def test_a_spec_folder_of_too_many_entries_is_refused_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runspec.daemon.gitmirror import GitError, Mirror

    upstream = Upstream(tmp_path)
    upstream.commit("many", {f"specs/s{i}.yaml": "runspec: 1\n" * (i + 1) for i in range(4)})
    monkeypatch.setattr("runspec.daemon.gitmirror.MAX_ENTRIES", 3)
    mirror = Mirror(tmp_path / "mirror.git", upstream.url)
    head = mirror.fetch("main")
    with pytest.raises(GitError, match="over 3 entries under specs/: follow a folder of specs"):
        mirror.specs(head, "specs")


def test_a_mirror_past_its_bound_is_refused_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from runspec.daemon.gitmirror import GitError, Mirror

    upstream = Upstream(tmp_path)
    upstream.commit("data, not specs", {"data.bin": os.urandom(300_000).hex()})
    monkeypatch.setattr("runspec.daemon.gitmirror.MAX_MIRROR_BYTES", 256 * 1024)
    mirror = Mirror(tmp_path / "mirror.git", upstream.url)
    with pytest.raises(GitError, match="over 0 MiB: follow a repository of specs"):
        mirror.fetch("main")
    assert not (tmp_path / "mirror.git").exists()
