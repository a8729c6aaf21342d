"""A run across two nodes: two `runspec run`s on 127.0.0.1, each with its own state folder and
an engine's node variables, training through torchrun on gloo (train.device: cpu).

Node 0 owns the budget, the pushes and the verdict; node 1 stages, follows torchrun, and
exits with it. Real LibreYOLO training, real torchrun, the real Hub client against the
stand-in Hub.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from runspec.push.hubrecord import record_json
from runspec.push.manifest import Manifest
from runspec.push.remote import MANIFEST, RECORD
from runspec.spec.loader import load_spec
from runspec.store.state import RunRecord, RunStatus, Terminal
from tests.fixtures_run import RUNSPEC, SpecWriter, finish_run, record_of, start_run, wait_record
from tests.fixtures_training import wait_for
from tests.hubserver import HubServer

pytestmark = pytest.mark.timeout(600)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _dstack(rank: int, port: int, wait: int = 120) -> dict[str, str]:
    return {
        "DSTACK_RUN_ID": "ds-two",
        "DSTACK_NODE_RANK": str(rank),
        "DSTACK_NODES_NUM": "2",
        "DSTACK_MASTER_NODE_IP": "127.0.0.1",
        "DSTACK_GPUS_PER_NODE": "1",
        "MASTER_PORT": str(port),
        "RUNSPEC_RENDEZVOUS_TIMEOUT": str(wait),
    }


def _skypilot(rank: int, port: int) -> dict[str, str]:
    return {
        "SKYPILOT_TASK_ID": "sky-two",
        "SKYPILOT_NODE_RANK": str(rank),
        "SKYPILOT_NUM_NODES": "2",
        "SKYPILOT_NODE_IPS": "127.0.0.1\n127.0.0.1\n",
        "SKYPILOT_NUM_GPUS_PER_NODE": "1",
        "MASTER_PORT": str(port),
        "RUNSPEC_RENDEZVOUS_TIMEOUT": "120",
    }


Pair = Callable[..., tuple[subprocess.Popen[str], subprocess.Popen[str]]]


@pytest.fixture
def start_pair(tmp_path: Path, write_spec: SpecWriter, hub_env: dict[str, str]) -> Iterator[Pair]:
    """Node 1, then node 0, of a two-node run named `name`; whatever a failed test leaves
    running is ended at teardown (by the pids found under the processes started here)."""
    started: list[subprocess.Popen[str]] = []

    def start(
        name: str,
        epochs: int,
        engine: Callable[[int, int], dict[str, str]],
        machines: tuple[str, str] = ("n0", "n1"),
    ) -> tuple[subprocess.Popen[str], subprocess.Popen[str]]:
        """`machines`: the state folders of node 0 and node 1 (a new pair: fresh machines)."""
        spec = write_spec(
            name, epochs=epochs, resources={"nodes": 2}, push={"hub": {"repo": f"tester/{name}"}}
        )
        port = _free_port()
        node1 = start_run(spec, tmp_path / machines[1], {**hub_env, **engine(1, port)})
        node0 = start_run(spec, tmp_path / machines[0], {**hub_env, **engine(0, port)})
        started.extend((node0, node1))
        return node0, node1

    yield start
    for proc in started:
        if proc.poll() is None:
            _kill_tree(proc)


def _final_commits(hub_server: HubServer, repo: str) -> list[str]:
    return [msg for _, _, msg in hub_server.repo(repo).commits if "(final)" in msg]


def _kill_tree(proc: subprocess.Popen[str]) -> None:
    """A node that dies: its runspec, its trainer, torchrun and the ranks (in sessions of
    their own), every one by the pid found under the process started here."""
    parent = psutil.Process(proc.pid)
    tree = [parent, *parent.children(recursive=True)]
    for each in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            each.send_signal(signal.SIGKILL)
    psutil.wait_procs(tree, timeout=30)


def test_node_1_alone_trains_nothing_and_a_stop_signal_ends_it_and_its_torchrun(
    tmp_path: Path, write_spec: SpecWriter, hub_env: dict[str, str]
) -> None:
    spec = write_spec("follower", resources={"nodes": 2})
    node1 = start_run(spec, tmp_path / "n1", {**hub_env, **_skypilot(1, _free_port())})
    try:
        # Waiting for node 0 in torchrun's rendezvous: its trainer and torchrun are up.
        trainer = wait_for_trainer(tmp_path / "n1")
        # It only starts torchrun, whose rank trains: it never loaded torch, which it would
        # hold for the whole run.
        assert not [m.path for m in trainer.memory_maps() if "libtorch" in m.path]
        tree = [trainer, *trainer.children(recursive=True)]
        node1.send_signal(signal.SIGTERM)
        code, out = finish_run(node1, timeout=120)
    finally:
        if node1.poll() is None:
            _kill_tree(node1)
    assert code == 75, out
    assert "stop signal: ending this node's ranks" in out
    assert not list((tmp_path / "n1").rglob("*.pt"))
    _, alive = psutil.wait_procs(tree, timeout=30)
    assert alive == []


def _cmdline(proc: psutil.Process) -> list[str]:
    """A child's command line; none for one that ended meanwhile (a zombie not yet reaped
    has no command line to read)."""
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def wait_for_trainer(state: Path) -> psutil.Process:
    end = time.monotonic() + 120
    while time.monotonic() < end:
        found = list(state.rglob("trainer.json"))
        if found:
            pid = json.loads(found[0].read_text())["identity"]["pid"]
            proc = psutil.Process(pid)
            if any("torch.distributed.run" in _cmdline(c) for c in proc.children()):
                return proc
        time.sleep(0.2)
    pytest.fail("node 1's trainer did not start torchrun within 120 s")


def test_two_nodes_train_the_run_together_past_a_stranger_and_a_stop_on_node_0_ends_node_1_well(
    tmp_path: Path, write_spec: SpecWriter, hub_env: dict[str, str], hub_server: HubServer
) -> None:
    """Under SkyPilot's node variables (the retried pair below, under dstack's, trains to the
    end on both nodes).

    torch's TCPStore takes any connection on every interface (it has no password): a
    stranger that joins as node 1 with torchrun's defaults reached the run's rendezvous and
    stalled it. The run's keys now sit under an id only its nodes can name (an HMAC keyed by
    the Hub token every node holds), so the stranger joins nothing and the real node 1 does."""
    spec = write_spec(
        "stopped", epochs=30, resources={"nodes": 2}, push={"hub": {"repo": "tester/stopped"}}
    )
    port = _free_port()
    node0 = start_run(spec, tmp_path / "n0", {**hub_env, **_skypilot(0, port)})
    stranger: subprocess.Popen[str] | None = None
    node1: subprocess.Popen[str] | None = None
    try:
        wait_for(lambda: _listening(port), 300, "node 0's rendezvous store")
        marker = tmp_path / "stranger-ran"
        script = tmp_path / "stranger.py"
        script.write_text(f"open({str(marker)!r}, 'w').write('joined')\n")
        stranger = subprocess.Popen(
            [
                *(sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--node_rank=1"),
                *("--master_addr=127.0.0.1", f"--master_port={port}", "--nproc_per_node=1"),
                *("--max_restarts=0", "--rdzv_conf=timeout=120", str(script)),
            ],
            env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(10)  # its agent has met the store and waits in the rendezvous it can name
        node1 = start_run(spec, tmp_path / "n1", {**hub_env, **_skypilot(1, port)})
        # Both nodes train an epoch together: the stranger stalled nothing.
        wait_record(tmp_path / "n0", "stopped", lambda r: r["epoch"] >= 1, timeout=400)
        cancel = subprocess.run(
            [*RUNSPEC, "cancel", "stopped", "--state", str(tmp_path / "n0")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        code0, out0 = finish_run(node0, timeout=300)
        code1, out1 = finish_run(node1, timeout=120)
    finally:
        for proc in (stranger, node1, node0):
            if proc is not None and proc.poll() is None:
                _kill_tree(proc)  # type: ignore[arg-type]
    # A stop decided on node 0 is no failure on node 1: it heard it through the store.
    assert (code0, code1) == (0, 0), out0[-3000:] + out1[-3000:]
    assert not marker.exists(), "the stranger's program ran as a rank of the run"
    assert "node 1 of 2: following node 0 at 127.0.0.1" in out1
    assert "node 0 stopped the run" in out1
    console0 = next((tmp_path / "n0").rglob("console.log")).read_text()
    console1 = next((tmp_path / "n1").rglob("console.log")).read_text()
    # One run of two ranks (LibreYOLO logs on rank 0 only).
    assert "DDP active: rank=0/2" in console0
    assert "--node_rank=1" in console1
    # The id never shows on a command line another process can read.
    assert "rdzv_id" not in console0 and "runspec-" not in console0.split("torchrun")[1][:200]
    # One final push, from node 0; node 1 pushed nothing and wrote no weights.
    assert len(_final_commits(hub_server, "tester/stopped")) == 1
    assert "weights/last.pt" in hub_server.files("tester/stopped")
    assert not list((tmp_path / "n1").rglob("*.pt"))
    assert "final push" not in out1 and "trainer started" in out1
    assert not (tmp_path / "n1" / "jobs" / "stopped" / "record.json").exists()


def test_a_node_that_dies_ends_node_0_with_its_newest_checkpoint_pushed(
    tmp_path: Path, start_pair: Pair, hub_server: HubServer
) -> None:
    node0, node1 = start_pair("lost", 30, _dstack)
    record = wait_record(tmp_path / "n0", "lost", lambda r: r["epoch"] >= 1, timeout=400)
    _kill_tree(node1)
    code0, out0 = finish_run(node0, timeout=240)
    assert code0 == 75, out0
    assert "Connection reset by peer" in out0 or "Connection closed by peer" in out0
    final = wait_record(tmp_path / "n0", "lost", lambda r: r["status"] == "finished", 5)
    assert final["last_push"]["final"] and final["last_push"]["epoch"] >= record["epoch"]
    assert len(_final_commits(hub_server, "tester/lost")) == 1
    assert "weights/last.pt" in hub_server.files("tester/lost")


def _pushed_record(hub_server: HubServer, repo: str) -> dict[str, Any]:
    entry = hub_server.repo(repo).head["runspec/record.json"]
    assert entry.data is not None
    data: dict[str, Any] = json.loads(entry.data)
    return data


def _pushed_checkpoint_epoch(hub_server: HubServer, repo: str) -> int:
    """The epoch of the checkpoint the Hub's record vouches for; 0 before any."""
    try:
        checkpoint = _pushed_record(hub_server, repo).get("checkpoint") or {}
    except (KeyError, AssertionError):
        return 0  # no repo or no record yet
    epoch: int = checkpoint.get("epoch", 0)
    return epoch


# What each node says when it resumes: the checkpoint, where from, and the commit it was read at.
_RESUMING = re.compile(r"resuming from (\S+\.pt) \(hub tester/again\), commit ([0-9a-f]{7})\b")


def test_a_pair_whose_node_0_dies_resumes_on_fresh_machines_from_one_checkpoint_on_every_node(
    tmp_path: Path, start_pair: Pair, hub_server: HubServer
) -> None:
    """Node 0 dies: node 1 ends, asking for a fresh machine. dstack retries the run (the same
    DSTACK_RUN_ID) on fresh machines; its eager pushes put an epoch's weights at the Hub as soon
    as they are written."""
    node0, node1 = start_pair("again", 6, _dstack)
    # The record a push carries names the newest checkpoint verified before it: the one that
    # vouches for epoch 2 comes with a later push than epoch 2's weights.
    wait_for(lambda: _pushed_checkpoint_epoch(hub_server, "tester/again") >= 2, 400, "epoch 2")
    trainers = [_trainer_pid(tmp_path / "n0"), _trainer_pid(tmp_path / "n1")]
    _kill_tree(node0)
    code1, out1 = finish_run(node1, timeout=240)
    assert code1 == 75, out1
    assert "exit 75 (a fresh machine)" in out1
    wait_for(lambda: not [pid for pid in trainers if _alive(pid)], 30, "both trainers' ends")
    # What node 0 pushed before it died stays at the Hub: the checkpoints it verified (which
    # of last.pt, best.pt, epoch_N.pt were complete then is the race of the moment).
    verified = record_of(tmp_path / "n0", "again")["last_push"]["files"]
    weights = [f for f in verified if f.startswith("weights/") and f.endswith(".pt")]
    assert weights and set(weights) <= set(hub_server.files("tester/again")), verified
    pushed = _pushed_record(hub_server, "tester/again")
    checkpoint, head = pushed["checkpoint"], hub_server.repo("tester/again").commits[-1][0]
    assert checkpoint is not None and checkpoint["epoch"] >= 2, pushed
    assert not _final_commits(hub_server, "tester/again")
    one = record_of(tmp_path / "n0", "again")

    node0, node1 = start_pair("again", 6, _dstack, machines=("m0", "m1"))
    code0, out0 = finish_run(node0, timeout=500)
    code1, out1 = finish_run(node1, timeout=120)
    assert (code0, code1) == (0, 0), out0[-4000:] + out1[-4000:]
    # Both nodes resumed from the same verified checkpoint. Node 0 reads it at the commit its
    # attempt ledger's gate read, before its own commit of the ledger; the follower at the
    # head when it looks: that one, or the ledger's, which changes runspec/attempts.json only.
    said0, said1 = _RESUMING.search(out0), _RESUMING.search(out1)
    assert said0 is not None and said1 is not None, out0[:4000] + out1[:4000]
    assert said0[1] == said1[1] and head.startswith(said0[2]), (said0, said1, head)
    commits = hub_server.repo("tester/again").commits
    later = [oid[:7] for oid, _files, _message in commits[[c[0] for c in commits].index(head) :]]
    assert said1[2] in later[:2], (said1, later)
    assert Path(checkpoint["path"]).name == said0[1]
    # Node 0 kept the budget that was left: the first attempt's deadline.
    assert "the budget left is" in out0, out0[:4000]
    # Node 1's copy is the verified file, byte for byte (its rank writes no weights).
    copy = tmp_path / "m1" / "runs" / "again" / checkpoint["path"]
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == checkpoint["sha256"]
    # Training went on past that epoch to the end, never again from epoch 1.
    said_epochs = [int(n) for n in re.findall(r"\bepoch (\d+)/6\b", out0)]
    assert said_epochs and min(said_epochs) == checkpoint["epoch"] + 1, out0[-4000:]
    two = record_of(tmp_path / "m0", "again")
    assert two["termination"] == "completed" and two["epoch"] == 6 and two["resumes"] == 1, two
    assert two["deadline"] == one["deadline"], (one["deadline"], two["deadline"])
    console1 = (tmp_path / "m1" / "runs" / "again" / "console.log").read_text()
    assert "--node_rank=1" in console1 and "runspec.trainer: completed" in console1
    # One final push, from node 0, and its weights are at the Hub.
    assert len(_final_commits(hub_server, "tester/again")) == 1
    verified = [f for f in two["last_push"]["files"] if f.startswith("weights/")]
    assert "weights/last.pt" in verified, two["last_push"]
    assert set(verified) <= set(hub_server.files("tester/again"))
    assert _pushed_record(hub_server, "tester/again")["termination"] == "completed"
    assert not (tmp_path / "m1" / "jobs" / "again" / "record.json").exists()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _trainer_pid(state: Path) -> int:
    found = list(state.rglob("trainer.json"))
    assert found, f"no trainer under {state}"
    pid: int = json.loads(found[0].read_text())["identity"]["pid"]
    return pid


def _seed_record(hub_server: HubServer, spec_path: Path, terminal: str | None) -> None:
    """The Hub as an earlier attempt of the task left it after a push of its run files alone:
    its record (with a terminal mark, when it failed for good) and its manifest, no weights."""
    spec = load_spec(spec_path)
    assert spec.push is not None and spec.push.hub is not None
    record = RunRecord(
        name=spec.name,
        spec_sha256=spec.sha256,
        status=RunStatus.FINISHED,
        terminal=Terminal(terminal, "2026-12-01T12:00:00+00:00") if terminal else None,
    )
    manifest = Manifest(spec.name, None, "2026-12-01T12:00:01+00:00", True, ())
    text = json.dumps(record_json(record, manifest)).encode()
    hub_server.put_file(spec.push.hub.repo, RECORD, text, repo_type="model")
    text = json.dumps(manifest.to_json()).encode()
    hub_server.put_file(spec.push.hub.repo, MANIFEST, text, repo_type="model")


def test_a_task_with_no_checkpoint_yet_starts_over_on_every_node(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    """An earlier attempt pushed its record but no checkpoint (taken in epoch 1): every node
    starts the run over, as node 0 does, never exit 2 ("nothing to resume", issue 36). Alone
    here, each waits 5 s for the other and asks for a fresh machine: node 0 alone trains
    nothing by itself."""
    spec = write_spec("over", resources={"nodes": 2}, push={"hub": {"repo": "tester/over"}})
    _seed_record(hub_server, spec, None)
    port = _free_port()
    for rank, said in (
        (1, "no verified checkpoint at hub tester/over: from scratch, as node 0 starts"),
        (0, "resuming from its preflight (no verified checkpoint at its target: from scratch)"),
    ):
        node = start_run(spec, tmp_path / f"n{rank}", {**hub_env, **_dstack(rank, port, wait=5)})
        code, out = finish_run(node, timeout=240)
        assert code == 75 and said in out, out
        assert "nothing to resume" not in out, out
        assert "epoch 1" not in out, out
    assert "node 0 of 2: owns the budget, the pushes and the verdict" in out
    assert "rendezvous timed out: the other nodes did not join within 5 s" in out
    # No epoch, no weights, nothing pushed: the Hub holds the earlier attempt's files alone.
    assert not [f for f in hub_server.files("tester/over") if f.startswith("weights/")]


def test_a_follower_refuses_what_node_0_refuses_with_exit_2_without_training(
    tmp_path: Path, write_spec: SpecWriter, hub_server: HubServer, hub_env: dict[str, str]
) -> None:
    """A task marked terminal: dstack retries on any error, so every node of the retry must
    end at once, the followers too."""
    terminal = "staging: dataset tester/gone not found"
    said = "failed for good and is not resumed"
    spec = write_spec("doomed", resources={"nodes": 2}, push={"hub": {"repo": "tester/doomed"}})
    _seed_record(hub_server, spec, terminal)
    port = _free_port()
    for rank in (1, 0):
        node = start_run(spec, tmp_path / f"n{rank}", {**hub_env, **_dstack(rank, port, wait=5)})
        code, out = finish_run(node, timeout=120)
        assert code == 2, out
        assert said in out and terminal in out, out
        # The record is on the Hub: `runspec rm` here would not clear it.
        assert "launch it again under another name" in out and "rm doomed" not in out, out
        # Nothing staged, no trainer started.
        assert not list((tmp_path / f"n{rank}").rglob("trainer.json")), out
        assert not (tmp_path / f"n{rank}" / "data").exists(), out


def test_a_follower_that_cannot_read_the_hub_asks_for_a_fresh_machine_without_training(
    tmp_path: Path, write_spec: SpecWriter, hub_env: dict[str, str]
) -> None:
    """It cannot know whether node 0 resumes the task: it must not train it from the start."""
    spec = write_spec("blind", resources={"nodes": 2}, push={"hub": {"repo": "tester/blind"}})
    nowhere = {**hub_env, "HF_ENDPOINT": f"http://127.0.0.1:{_free_port()}"}
    node1 = start_run(spec, tmp_path / "n1", {**nowhere, **_dstack(1, _free_port(), wait=5)})
    code1, out1 = finish_run(node1, timeout=120)
    assert code1 == 75, out1
    assert "cannot read where the run stands" in out1 and "exit 75 (a fresh machine)" in out1
    assert not list((tmp_path / "n1").rglob("trainer.json")), out1
    assert not (tmp_path / "n1" / "data").exists(), out1


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0
