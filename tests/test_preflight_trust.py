"""`runspec preflight` FAILs at hour 0 what would fail seconds into the run: a dataset that is
not there, a Hub that cannot be reached, a data.yaml from another machine, a repo that holds
another run. Through the real command, the real child and the local Hub server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from runspec.checkresult import CheckResult
from runspec.preflight.report import PreflightReport
from tests.fixtures_run import SpecWriter, finish_run, start_run
from tests.hubserver import HubServer

REPO = Path(__file__).resolve().parent.parent
TRAIN = "train: {model: yolo9-t, epochs: 3, device: cpu, args: {pretrained: false}}\n"


def _preflight_checks(tmp_path: Path, body: str, name: str) -> tuple[int, list[dict[str, str]]]:
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(
        f"runspec: 1\nname: {name}\nbudget: {{wall_clock: 10m}}\n{TRAIN}{body}", encoding="utf-8"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "runspec", "preflight", str(spec), "--state",
         str(tmp_path / "state"), "--format", "json"],
        capture_output=True, text=True, timeout=300, check=False, cwd=REPO,
    )  # fmt: skip
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)["checks"]


def _preflight(tmp_path: Path, body: str, name: str = "trust") -> tuple[int, dict[str, dict]]:
    code, checks = _preflight_checks(tmp_path, body, name)
    return code, {c["name"]: c for c in checks}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_hub_dataset_repo_that_does_not_exist_fails_naming_it(
    tmp_path: Path, hub_server: HubServer
) -> None:
    code, checks = _preflight(
        tmp_path, "dataset:\n  hub: {repo: org/no-such-ds, file: ds.tar}\n  data: ds/data.yaml\n"
    )
    assert code == 1
    assert checks["dataset"]["status"] == "fail", checks
    assert "dataset repo org/no-such-ds does not exist" in checks["dataset"]["message"]
    assert "dataset.hub.repo" in checks["dataset"]["fix"]


def test_a_hub_dataset_file_that_is_not_in_the_repo_fails_naming_it(
    tmp_path: Path, hub_server: HubServer
) -> None:
    hub_server.put_file("org/ds", "other.tar", b"not it", repo_type="dataset")
    code, checks = _preflight(
        tmp_path, "dataset:\n  hub: {repo: org/ds, file: ds.tar}\n  data: ds/data.yaml\n"
    )
    assert code == 1
    assert checks["dataset"]["status"] == "fail", checks
    assert "has no file 'ds.tar'" in checks["dataset"]["message"]
    assert "dataset.hub.file" in checks["dataset"]["fix"]
    assert checks["dataset"]["fix"].endswith("; it holds other.tar"), checks["dataset"]["fix"]


def test_a_dataset_path_that_is_not_here_fails(tmp_path: Path) -> None:
    code, checks = _preflight(tmp_path, f"dataset: {{path: {tmp_path / 'nope' / 'data.yaml'}}}\n")
    assert code == 1
    assert checks["dataset"]["status"] == "fail", checks
    assert (
        f"dataset.path {tmp_path / 'nope' / 'data.yaml'} does not exist"
        in (checks["dataset"]["message"])
    )
    # One line for one mistake: no doctor warning that a path dataset is "not staged yet".
    assert [c for c in checks.values() if c["status"] != "pass"] == [checks["dataset"]]


def test_a_data_yaml_with_an_absolute_path_from_another_machine_names_it(
    tmp_path: Path,
) -> None:
    data = tmp_path / "ds" / "data.yaml"
    data.parent.mkdir()
    (data.parent / "images" / "train").mkdir(parents=True)
    data.write_text(
        "path: /home/alice/datasets/ds\ntrain: images/train\nval: images/train\nnames: [a]\n"
    )
    code, checks = _preflight(tmp_path, f"dataset: {{path: {data}}}\n")
    assert code == 1
    failed = [c for c in checks.values() if c["status"] == "fail"]
    assert len(failed) == 1, failed
    assert "path: /home/alice/datasets/ds" in failed[0]["message"]
    assert "/home/alice/datasets/ds/images/train" in failed[0]["message"]
    assert "the machine the dataset was made on" in failed[0]["message"]
    assert "remove the `path:` line" in failed[0]["fix"]


def test_an_unreachable_hub_says_so_and_not_that_runspec_crashed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = f"http://127.0.0.1:{_free_port()}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_TOKEN", "hf_testunreachable")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    code, checks = _preflight(
        tmp_path,
        "dataset:\n  hub: {repo: org/ds, file: ds.tar}\n  data: ds/data.yaml\n"
        "push: {hub: {repo: org/run}}\n",
    )
    assert code == 1
    for name in ("push", "dataset"):
        check = checks[name]
        assert check["status"] == "fail", check
        assert f"cannot reach the Hub at {endpoint}: connection refused" in check["message"]
        assert check["fix"] == "check the network or HF_ENDPOINT"
        assert "crashed" not in check["message"]
    # Typed where it was found: the network's, so the run is never marked terminal for it.
    found = CheckResult.from_json(checks["dataset"])
    assert found.transient and not PreflightReport("dataset", [found]).permanent


def _held_by(hub_server: HubServer, repo: str, run: str) -> None:
    manifest = {"run": run, "epoch": 3, "time": "", "final": True, "files": []}
    hub_server.put_file(
        repo, "runspec/manifest.json", json.dumps(manifest).encode(), repo_type="model"
    )
    hub_server.put_file(repo, "weights/best.pt", b"run-a's weights", repo_type="model")


def test_a_repo_holding_another_run_is_refused_unless_reuse_is_said(
    tmp_path: Path, hub_server: HubServer
) -> None:
    _held_by(hub_server, "org/shared", "run-a")
    body = "dataset: {synthetic: {}}\npush: {hub: {repo: org/shared%s}}\n"
    code, checks = _preflight(tmp_path, body % "", name="run-b")
    assert code == 1
    push = checks["push"]
    assert push["status"] == "fail", push
    assert "model repo org/shared holds another run, 'run-a'" in push["message"]
    assert "push.hub.reuse: true" in push["fix"]
    # Said on purpose, it passes; and a run is never refused its own repo.
    code, checks = _preflight(tmp_path, body % ", reuse: true", name="run-b")
    assert checks["push"]["status"] == "pass", checks["push"]
    code, checks = _preflight(tmp_path, body % "", name="run-a")
    assert checks["push"]["status"] == "pass", checks["push"]
    assert hub_server.files("org/shared") == ["runspec/manifest.json", "weights/best.pt"]


def test_a_repo_holding_an_earlier_run_of_the_same_name_is_refused_before_training(
    tmp_path: Path, hub_server: HubServer
) -> None:
    # `runspec rm again` freed the name here; the repo still holds that run's weights.
    earlier = {"name": "again", "spec_sha256": "0" * 64, "started_at": "2026-01-02T03:04:05Z"}
    hub_server.put_file("org/again", "runspec/record.json", json.dumps(earlier).encode(), "model")
    hub_server.put_file("org/again", "weights/best.pt", b"the earlier run's weights", "model")
    body = "dataset: {synthetic: {}}\npush: {hub: {repo: org/again%s}}\n"
    code, checks = _preflight(tmp_path, body % "", name="again")
    assert code == 1
    push = checks["push"]
    assert push["status"] == "fail", push
    assert "model repo org/again holds an earlier run also named 'again'" in push["message"]
    assert "runspec submit --resume" in push["fix"] and "push.hub.reuse: true" in push["fix"]
    code, checks = _preflight(tmp_path, body % ", reuse: true", name="again")
    assert checks["push"]["status"] == "pass", checks["push"]
    assert not (tmp_path / "state").exists()  # `runspec preflight` creates no folder


def test_a_run_refused_for_an_earlier_runs_repo_writes_nothing_there_not_even_its_lease(
    tmp_path: Path, hub_server: HubServer, write_spec: SpecWriter
) -> None:
    # The lease's first renewal is made before the preflight (a box that hangs there is
    # watched too): it used to land in the earlier run's repo before the preflight refused it.
    earlier = {"name": "again", "spec_sha256": "0" * 64, "started_at": "2026-01-02T03:04:05Z"}
    hub_server.put_file("org/again", "runspec/record.json", json.dumps(earlier).encode(), "model")
    head = hub_server.put_file("org/again", "weights/best.pt", b"earlier weights", "model")
    assert head == hub_server.repo("org/again").sha
    spec = write_spec(
        "again",
        epochs=1,
        push={"hub": {"repo": "org/again"}},
        watch={"lease": "10s"},
        finish={"action": "none"},
    )
    code, out = finish_run(start_run(spec, tmp_path / "state"), timeout=300)
    assert code != 0, out
    assert "holds an earlier run also named 'again'" in out, out
    assert "no lease in org/again yet" not in out, out  # the run said why, not a Hub fault
    assert hub_server.repo("org/again").sha == head, hub_server.files("org/again")
    assert "runspec/lease.json" not in hub_server.files("org/again")


def test_the_record_names_the_run_when_no_manifest_does(
    tmp_path: Path, hub_server: HubServer
) -> None:
    hub_server.put_file("org/rec", "runspec/record.json", b'{"name": "old-run"}', "model")
    _, checks = _preflight(
        tmp_path, "dataset: {synthetic: {}}\npush: {hub: {repo: org/rec}}\n", name="new-run"
    )
    assert checks["push"]["status"] == "fail" and "'old-run'" in checks["push"]["message"]


def test_notify_urls_are_checked_showing_scheme_and_host_never_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNSPEC_TEST_UNSET_HOOK", raising=False)
    monkeypatch.setenv("RUNSPEC_TEST_TOPIC", "s3cr3t-topic-9f2")
    code, checks = _preflight_checks(
        tmp_path,
        "dataset: {synthetic: {}}\nnotify:\n  - ntfy://ntfy.sh/${RUNSPEC_TEST_TOPIC}\n"
        "  - ${RUNSPEC_TEST_UNSET_HOOK}\n  - nosuchscheme://example.org/x\n",
        "notify",
    )
    assert code == 1
    assert "s3cr3t-topic-9f2" not in json.dumps(checks)
    notify = [c for c in checks if c["name"] == "notify"]
    assert [c["status"] for c in notify] == ["pass", "fail", "fail"], notify
    assert notify[0]["message"] == "notify URL 1: ntfy://ntfy.sh"
    assert "${RUNSPEC_TEST_UNSET_HOOK} is not set" in notify[1]["message"]
    assert "/etc/runspec/env" in notify[1]["fix"]
    assert "(nosuchscheme:): apprise cannot read it" in notify[2]["message"]
