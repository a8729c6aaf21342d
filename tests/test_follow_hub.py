"""The daemon follows a Hub repository (`hf://datasets/...`) as it follows a git one: the local
Hub stand-in (tests/hubserver.py, its Xet path on) and a real daemon, reading the branch with
the real huggingface_hub client and the Hub token the box already has."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runspec.daemon.gitmirror import GitError, check_remote, hub_repo
from runspec.daemon.hubmirror import HubSource
from tests.fixtures_daemon import DaemonProc, runspec_cli, spec_text
from tests.hubserver import HubServer, blob_id
from tests.test_follow import _jobs, _next_read, _provenance, _started_until_queued

REPO = "acme/experiments"
URL = f"hf://datasets/{REPO}"


def _config(tmp: Path) -> Path:
    config = tmp / "runspecd.yaml"
    config.write_text(f"follow:\n  - repo: {URL}\n    branch: main\n    every: 10s\n")
    return config


def test_a_hub_repository_is_followed_once_across_restarts_and_hostile_files_refused(
    tmp_path: Path, xet_on: HubServer, make_daemon: Any
) -> None:
    from huggingface_hub import HfApi

    hub = xet_on
    text = spec_text("one").encode()
    added = hub.put_file(REPO, "specs/one.yaml", text, message="one: a first try", author="ada")
    hub.put_file(REPO, "README.md", b"experiments\n", message="docs")  # the head moves on
    config = _config(tmp_path)
    daemon = _started_until_queued(make_daemon, config, "one")
    git = _provenance(daemon.state, "one")["git"]
    assert git["remote"] == URL and git["path"] == "specs/one.yaml"
    assert git["blob"] == blob_id(text) and git["commit"] == added  # the commit that added it
    assert git["author"] == "ada" and git["subject"] == "one: a first try"
    assert git["dirty"] is False

    # A restart reads the branch again and queues nothing.
    assert daemon.stop() == 0
    again: DaemonProc = make_daemon(config)
    again.start()
    again.wait_ready()
    _next_read(again)
    assert _jobs(again.state) == ["one"] and again.output.count("follow: queued") == 0

    # A broken spec, one too big to be a spec (stored through Xet, as the Hub stores a large
    # file), and a name that would rewrite a terminal: each refused, none read for nothing.
    broken = spec_text("three").replace("  epochs: 2\n", "  epochs: two\n").encode()
    hub.put_file(REPO, "specs/three.yaml", broken, message="three")
    huge = b"\0" + b"#" * (2 << 20)
    HfApi(endpoint=hub.url).upload_file(
        path_or_fileobj=huge, path_in_repo="specs/huge.yaml", repo_id=REPO, repo_type="dataset"
    )
    assert hub.entry(REPO, "specs/huge.yaml", "dataset").xet_hash is not None
    hub.put_file(REPO, "specs/odd\x1b[2J.yaml", spec_text("odd").encode(), message="odd")
    # Three commits: a read may fall between them, so read until it has seen the last.
    said = (
        f"follow: refused, nothing runs: {URL}@main:specs/three.yaml:7:",
        f"{URL}@main:specs/huge.yaml:1:1: the file is {len(huge):,} bytes",
    )
    for _ in range(5):
        _next_read(again)
        if all(line in again.output for line in said):
            break
    assert all(line in again.output for line in said), again.output
    assert not [r for r in hub.log if r.op in ("resolve", "xet_bridge") and "huge" in r.path]
    status = runspec_cli("status", "--state", str(again.state), "--inbox", str(again.inbox))
    assert f"following {URL}@main:specs: at " in status.stdout, status.stdout
    assert "specs/odd\\x1b[2J.yaml: an odd name, never followed" in status.stdout
    assert "\x1b" not in status.stdout
    assert _jobs(again.state) == ["one"]

    # A refusal lasts while its file does.
    hub.put_file(REPO, "specs/odd\x1b[2J.yaml", None, message="drop the odd one")
    _next_read(again)
    status = runspec_cli("status", "--state", str(again.state), "--inbox", str(again.inbox))
    assert "an odd name" not in status.stdout and "specs/three.yaml:7:" in status.stdout


def test_a_hub_folder_with_too_many_files_is_refused_whole(
    hub_server: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("runspec.daemon.hubmirror.MAX_ENTRIES", 3)  # as imported there
    for i in range(4):
        hub_server.put_file(REPO, f"specs/s{i}.yaml", b"runspec: 1\n")
    source = HubSource(URL)
    head = source.fetch("main")
    with pytest.raises(GitError, match="over 3 entries under specs/: follow a folder of specs"):
        source.specs(head, "specs")
    with pytest.raises(GitError, match="no dataset acme/experiments with a branch 'dev'"):
        source.fetch("dev")


@pytest.mark.parametrize(
    ("url", "found"),
    [
        ("hf://datasets/acme/experiments", ("dataset", "acme/experiments")),
        ("hf://acme/experiments", ("model", "acme/experiments")),
        ("hf://spaces/acme/demo/", ("space", "acme/demo")),
        ("hf://datasets/acme", None),
        ("hf://datasets/acme/../x", None),
        ("hf://datasets/acme/x/specs", None),
    ],
)
def test_an_hf_url_names_one_hub_repository(url: str, found: tuple[str, str] | None) -> None:
    assert hub_repo(url) == found
    assert (check_remote(url) is None) == (found is not None)
