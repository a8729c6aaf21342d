"""The model card never holds back the weights, and a run without weights pushes nothing:
whole `runspec run`s of a tiny real training against the local Hub server."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from runspec.push.card import model_card
from runspec.push.cardpush import push_card
from runspec.push.dirtarget import DirTarget
from runspec.push.hubrecord import push_first_card
from runspec.push.receipt import source
from runspec.push.report import prepare
from runspec.run.accept import accept
from runspec.spec.loader import load_accepted, load_spec, load_spec_text
from runspec.spec.provenance import public
from runspec.store.paths import RunPaths, StateLayout
from runspec.store.state import RecordStore, RunRecord, RunStatus, Termination
from tests.fixtures_run import SpecWriter, finish_run, record_of, start_run
from tests.hubserver import HubServer
from tests.test_machine_safety import pushed, trained


def _run(write_spec: SpecWriter, hub_env: dict[str, str], name: str, epochs: int) -> str:
    """A whole run of `name` pushing to the Hub repo me/NAME; its output."""
    spec = write_spec(
        name, epochs=epochs, push={"hub": {"repo": f"me/{name}"}, "every": "1h"},
        finish={"action": "none"},
    )  # fmt: skip
    code, out = finish_run(start_run(spec, spec.parent / "state", hub_env), timeout=400)
    assert code == 0, out[-4000:]
    return out


@pytest.mark.training
def test_a_card_the_hub_refuses_leaves_the_final_weights_pushed_and_verified(
    hub_server: HubServer, hub_env: dict[str, str], write_spec: SpecWriter, tmp_path: Path
) -> None:
    # The Hub's metadata check answers 400 for every card it is shown.
    hub_server.card_errors = ['"license" must be one of the licenses the Hub knows']
    out = _run(write_spec, hub_env, "cardrun", 2)
    record = record_of(tmp_path / "state", "cardrun")
    assert record["termination"] == "completed", out[-4000:]
    assert record["last_push"]["final"] is True, out[-4000:]
    files = hub_server.files("me/cardrun")
    assert "weights/last.pt" in files and "runspec/record.json" in files
    assert "README.md" not in files
    assert "the model card was NOT pushed" in out, out[-4000:]
    assert "verified without it" in out and '"license" must be one of' in out
    assert "NOTHING VERIFIED" not in out and "NOT verified" not in out.replace("card was NOT", "")


@pytest.mark.training
def test_a_card_goes_out_after_the_verified_weights(
    hub_server: HubServer, hub_env: dict[str, str], write_spec: SpecWriter
) -> None:
    out = _run(write_spec, hub_env, "cardok", 1)
    # The lease's own commits (runspec/lease.json, issue 22) come and go beside the run's.
    commits = [c for c in hub_server.repo("me/cardok").commits if "lease of" not in c[2]]
    messages = [message for _, _, message in commits]
    # Every push carries the record; the card comes in a commit of its own right after
    # verified weights: a first card after the first push (the repo's `runspec` tag), the
    # final card last of all, right after the final weights.
    assert all("runspec/record.json" in files for _, files, _ in commits), messages
    final = next(i for i, m in enumerate(messages) if m.endswith("(final)"))
    assert messages[final + 1 :] == ["runspec: model card", "runspec: receipt"], messages
    if final > 0:
        assert messages[:2] == ["runspec: epoch 1", "runspec: model card"], messages
        # Before the first card, README.md is at most the first lease's stub (no weights named).
        stub = commits[0][1].get("README.md")
        assert stub is None or b"weights/" not in (stub.data or b""), stub
    assert "model card pushed to hub me/cardok" in out
    # The receipt names each final weight by the sha256 of the bytes the Hub holds.
    receipt = json.loads(hub_server.read_file("me/cardok", "runspec/receipt.json"))
    for weight in receipt["weights"]:
        held = hub_server.read_file("me/cardok", weight["path"])
        assert hashlib.sha256(held).hexdigest() == weight["sha256"], weight["path"]
    assert {"weights/last.pt", "weights/best.pt"} <= {w["path"] for w in receipt["weights"]}
    assert receipt["epoch"] == 1 and receipt["finish"]["action"] == "none"
    # What a later `runspec plan --hub` plans with: what trained, and an epoch's time.
    assert receipt["training"]["model"] == "yolo9-t" and receipt["training"]["epoch_seconds"] > 0


def test_a_run_that_made_no_weights_pushes_no_weights_and_no_card(
    hub_server: HubServer, hub_env: dict[str, str], write_spec: SpecWriter
) -> None:
    spec = write_spec(
        "noweights",
        dataset={"path": str(spec_missing := "/nonexistent/dataset/data.yaml")},
        push={"hub": {"repo": "me/noweights"}},
        finish={"action": "none"},
    )
    state = spec.parent / "state"
    code, out = finish_run(start_run(spec, state, hub_env), timeout=300)
    assert code != 0, out[-4000:]
    assert spec_missing in out
    # The repo came with the run's first lease (watched from its start): it holds the lease
    # and the stub card, no weights and no model card.
    assert hub_server.files("me/noweights") == ["README.md", "runspec/lease.json"], out[-4000:]
    assert b"its weights arrive with its first push" in hub_server.read_file(
        "me/noweights", "README.md", repo_type="model"
    )
    assert "no weights were made: nothing pushed" in out


def test_a_first_card_made_after_the_final_one_never_takes_its_place(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    """The pusher's first card (after its first verified push, in its own thread) can be
    written after the final push has drawn the final card: the card that goes out last is
    still the final one (seen: the Hub kept the first card, the run "training")."""
    state = tmp_path / "state"
    accept(load_spec(write_spec("cards", push={"dir": str(tmp_path / "vol")})), state)
    paths = StateLayout(state).run_paths("cards")
    trained(paths, 1)
    store = RecordStore(state)
    record = pushed(store, "cards", Termination.COMPLETED)
    spec = load_accepted(paths.spec_file)
    target = DirTarget(tmp_path / "vol", "cards")
    said: list[str] = []
    prepare(spec, paths, record, said.append)  # the lifecycle's final card
    training = replace(record, status=RunStatus.TRAINING, termination=None)
    assert push_first_card(spec, paths, training, target, said.append)  # the pusher, late
    assert push_card(target, paths, said.append, 60.0)  # the lifecycle's last commit
    card = (tmp_path / "vol" / "cards" / "README.md").read_text()
    assert "| ended | completed: test |" in card and "| ended | training" not in card, card
    # The first card is a live run's: it has not ended, and what it cost is so far.
    first = paths.first_card.read_text()
    assert "| ended |" not in first, first
    assert "| state | training: under way, this card is replaced when it ends |" in first


def test_the_card_and_the_pushed_provenance_name_no_folder_of_the_submitting_machine(
    tmp_path: Path,
) -> None:
    # A spec in a clone of a repository on the submitter's own disk: its remote is a folder
    # there. The card said "specs/a.yaml at commit ... of /home/ada/repos/exp.git".
    local = {"commit": "a" * 40, "path": "specs/a.yaml", "dirty": False}
    submitted = {
        "via": "runspec submit",
        "source_path": "/home/ada/exp/specs/a.yaml",
        "submitted_by": "ada",
        "host": "ada-laptop",
        "git": {**local, "remote": "/home/ada/repos/exp.git", "branch": "main"},
    }
    shown = json.dumps(public(submitted))
    assert "/home/ada" not in shown and "ada-laptop" not in shown and '"file": "a.yaml"' in shown
    for remote in ("file:///home/ada/repos/exp.git", "../exp.git", "~/repos/exp.git"):
        assert "remote" not in public({"git": {**local, "remote": remote}})["git"], remote
    hosted = {**local, "remote": "https://github.com/acme/exp.git"}
    assert public({"git": hosted})["git"]["remote"] == "https://github.com/acme/exp.git"
    spec = load_spec_text(
        "runspec: 1\nname: a\ndataset: {synthetic: {}}\ntrain: {model: yolo9-t, epochs: 3}\n"
        "budget: {wall_clock: 1h}\n",
        "a.yaml",
    )
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    paths.provenance_file.parent.mkdir(parents=True)
    paths.provenance_file.write_text(json.dumps(submitted))
    card = model_card(spec, paths, RunRecord(name="a", spec_sha256="0" * 64), None, False, [])
    assert "specs/a.yaml at commit aaaaaaaaaaaa" in card and "/home/ada" not in card, card
    # The receipt's source: the git facts and the file's name, no folder of that machine.
    assert source(paths) == {"via": "runspec submit", "file": "a.yaml", **local, "branch": "main"}
