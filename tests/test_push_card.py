"""The model card never holds back the weights, and a run without weights pushes nothing:
whole `runspec run`s of a tiny real training against the local Hub server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures_run import SpecWriter, finish_run, record_of, start_run
from tests.hubserver import HubServer


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
    assert messages[final + 1 :] == ["runspec: model card"], messages
    if final > 0:
        assert messages[:2] == ["runspec: epoch 1", "runspec: model card"], messages
        assert "README.md" not in commits[0][1]
    assert "model card pushed to hub me/cardok" in out


def test_a_run_that_made_no_weights_creates_no_repo_and_no_card(
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
    assert ("model", "me/noweights") not in hub_server.repos, out[-4000:]
    assert hub_server.count("create_repo") == 0
    assert "no weights were made: nothing pushed" in out
