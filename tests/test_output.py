"""What a person who walked away comes back to, through the real commands: the daemon's own
output, `runspec logs`, `runspec status`, the pushed folder's pictures and model card, and the
notification that arrives before the finish acts."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_daemon import DaemonProc, drop, runspec_cli, spec_text, wait_until

LOGGING_FORMAT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR) ")
TAGS = ("runspecd: ", "inbox: ", "machine: ")


class Hook:
    """A local HTTP endpoint for apprise's json:// target: what arrived, when, and whether the
    finish (a command touching `marker`) had run by then."""

    def __init__(self, marker: Path) -> None:
        self.got: list[dict[str, Any]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                body["finish_had_run"] = marker.exists()
                body["path"] = self.path
                hook.got.append(body)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                del args

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def titles(self) -> list[str]:
        return [str(m["title"]) for m in self.got]


@pytest.fixture
def hook(tmp_path: Path) -> Iterator[Hook]:
    served = Hook(tmp_path / "finish-ran")
    yield served
    served.server.shutdown()


def _told_spec(port: int, marker: Path) -> str:
    return (
        "runspec: 1\nname: told\n"
        "dataset:\n  synthetic: {train: 8, val: 4, imgsz: 64, classes: 3, seed: 0}\n"
        "train:\n  model: yolo9-t\n  epochs: 3\n  batch: 4\n  imgsz: 32\n  device: cpu\n"
        "  save_period: 1\n"
        "  args: {pretrained: false, workers: 0, eval_interval: 1, patience: 0, amp: false}\n"
        "push:\n  dir: pushed\n  every: 1m\n"
        "budget:\n  wall_clock: 30m\n  hourly_cost: 1.0\n"
        "preflight: {matmul: false, collective: false, doctor: false, disk: 600MB}\n"
        f"finish:\n  action: command\n  command: [/usr/bin/touch, {marker}]\n"
        # The token-looking path part comes from the daemon's environment, as a secret would.
        f"notify: ['json://127.0.0.1:{port}/hooks/${{HOOK_TOKEN}}']\n"
        "env: {OMP_NUM_THREADS: 1}\n"
    )


@pytest.mark.training
@pytest.mark.timeout(900)
def test_a_run_through_the_daemon_reads_as_one_story(  # type: ignore[no-untyped-def]
    make_daemon, hook: Hook, tmp_path: Path
) -> None:
    marker = tmp_path / "finish-ran"
    token = "tok-9f8e7d6c5b4a"
    daemon: DaemonProc = make_daemon()
    drop(daemon.inbox, "told.yaml", _told_spec(hook.port, marker))
    daemon.start("--once", env={"HOOK_TOKEN": token})
    assert daemon.wait(timeout=600) == 0, daemon.output
    out = daemon.output
    lines = out.splitlines()

    # Human lines only, each naming what it is about; no logging format at this verbosity.
    assert not [line for line in lines if LOGGING_FORMAT.search(line)], out
    assert all(line.startswith(("told: ", *TAGS)) for line in lines), out
    # Each epoch said once (the trainer rewrites its last epoch's marker after training).
    for epoch in (1, 2, 3):
        assert sum(line.startswith(f"told: epoch {epoch}/3 ") for line in lines) == 1, out
    assert out.count("told: finish: ") >= 1 and "told: summary: completed at epoch 3/3" in out
    # The summary is what a person reads last.
    assert lines[-1].startswith("told:   finish: command exited 0"), lines[-5:]

    # A word when training started, and when it ended: before the finish ran, saying what
    # comes next; the URL's token never shows in the output.
    assert hook.titles() == ["runspec: told started training", "runspec: told completed"]
    ended = hook.got[1]
    assert ended["finish_had_run"] is False and marker.exists()
    assert "next: finish: command" in ended["message"] and ended["type"] == "success"
    assert "verified final push: epoch 3" in ended["message"]
    assert hook.got[0]["path"] == f"/hooks/{token}" and token not in out
    assert 'told: notify: "completed" sent (json)' in out

    # The pushed folder carries the pictures and the model card the Hub renders.
    pushed = daemon.state / "pushed" / "told"
    card = (pushed / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: libreyolo\npipeline_tag: object-detection\n")
    assert "| epochs | 3 of 3 |" in card and "| ended | completed: training completed |" in card
    assert "![training curves](runspec/curves.png)" in card
    assert 'model = LibreYOLO("' in card and "/weights/best.pt" in card
    assert (pushed / "runspec" / "curves.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    plots = sorted(p.name for p in (pushed / "val" / "plots").glob("*.png"))
    assert plots and all(f"(val/plots/{name})" in card for name in plots)
    manifest = json.loads((pushed / "runspec" / "manifest.json").read_text())
    # The pictures ride with the final weights; the card goes after them, on its own.
    assert "runspec/curves.png" in {f["path"] for f in manifest["files"]}
    assert "README.md" not in {f["path"] for f in manifest["files"]}
    assert "told: model card pushed to dir" in out

    # `runspec logs`: runspec's lines and the training's, in one stream; -n takes the tail.
    story = runspec_cli("logs", "told", "--state", str(daemon.state))
    assert story.returncode == 0, story.stderr
    told = story.stdout.splitlines()
    assert any(line.endswith("train: runspec.trainer: completed") for line in told)
    assert any("runspec: epoch 3/3 " in line for line in told)
    last3 = runspec_cli("logs", "told", "-n", "3", "--state", str(daemon.state))
    assert last3.stdout.splitlines() == told[-3:]


def test_status_shows_waiting_and_refused_specs_with_no_daemon_running(  # type: ignore[no-untyped-def]
    make_daemon, tmp_path: Path
) -> None:
    daemon: DaemonProc = make_daemon()
    daemon.start()
    daemon.wait_ready()
    drop(daemon.inbox, "bad.yaml", spec_text("bad").replace("epochs: 2", "epochs: -3"))
    wait_until((daemon.inbox / "rejected" / "bad.yaml.error").exists, what="the refusal")
    assert daemon.stop() == 0
    good = tmp_path / "later.yaml"
    good.write_text(spec_text("later"))
    submitted = runspec_cli("submit", str(good), "--inbox", str(daemon.inbox))
    assert submitted.returncode == 0, submitted.stderr

    args = ("--state", str(daemon.state), "--inbox", str(daemon.inbox))
    status = runspec_cli("status", *args)
    assert status.returncode == 0, status.stderr
    text = status.stdout
    assert text.startswith(f"runspecd: not running ({daemon.state})\n")
    assert re.search(r"^later\.yaml +waiting in the inbox", text, re.M), text
    assert re.search(r"^bad\.yaml +rejected", text, re.M), text
    assert "bad.yaml: rejected at " in text
    # The rm that clears it works as printed: the inbox status was given goes with it.
    bad = daemon.inbox / "rejected" / "bad.yaml"
    clear = f"runspec rm {bad} --inbox {daemon.inbox} --state {daemon.state}"
    assert f"bad.yaml: the whole error is in {bad}.error; `{clear}` clears it" in text
    assert "bad.yaml:7:11: /train/epochs: -3 is less than the minimum of 1" in text
    rows = json.loads(runspec_cli("status", "--json", *args).stdout)["runs"]
    assert [(r["name"], r["status"]) for r in rows] == [
        ("later.yaml", "waiting"),
        ("bad.yaml", "rejected"),
    ]
    # A refusal older than a day shows only with -a.
    day_old = time.time() - 2 * 24 * 3600
    os.utime(daemon.inbox / "rejected" / "bad.yaml.error", (day_old, day_old))
    assert "rejected" not in runspec_cli("status", *args).stdout
    assert "rejected" in runspec_cli("status", "-a", *args).stdout
