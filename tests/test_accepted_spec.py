"""An accepted spec is read one way and never judged again: a run accepted under an older rule
set (one of today's rules refuses its spec) still trains, is pushed, and lets the machine end.

The state folder is laid down as an older runspec left it: the run accepted, its record saying
no rules version (before the record kept one), its spec setting an env name that today's rules
refuse (NO_PROXY, refused since the spec's env may no longer route traffic).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runspec.errors import SpecInvalid
from runspec.machine.verdict import machine_verdict
from runspec.run.accept import accept
from runspec.spec.loader import AcceptedSpecUnreadable, load_accepted, load_spec
from runspec.spec.rules import RULES_VERSION
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore
from tests.fixtures_daemon import DaemonProc
from tests.test_daemon_runs import TRAIN_BOUND, tiny

NAME = "older"
# What the older rules let through and today's refuse.
OLDER = tiny(NAME, 2).replace("env: {OMP_NUM_THREADS: 1}", "env: {OMP_NUM_THREADS: 1, NO_PROXY: x}")


def _accepted_long_ago(tmp_path: Path, state: Path) -> None:
    source = tmp_path / f"{NAME}.yaml"
    source.write_text(OLDER)
    with pytest.raises(SpecInvalid, match="NO_PROXY"):
        load_spec(source)  # today's rules refuse it: the premise of the test
    accept(load_accepted(source), state, {"via": "inbox"})
    store = RecordStore(state)
    record = store.load(NAME)
    assert record is not None
    assert record.spec_rules == RULES_VERSION  # what a runspec of today writes
    record.spec_rules = None  # what an older one wrote
    store.save(record)


def test_an_accepted_spec_reads_back_as_accepted(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _accepted_long_ago(tmp_path, state)
    spec = load_accepted(StateLayout(state).run_paths(NAME).spec_file)
    assert spec.name == NAME
    assert dict(spec.env) == {"OMP_NUM_THREADS": "1", "NO_PROXY": "x"}
    assert spec.train.args["workers"] == 0


@pytest.mark.parametrize(
    ("content", "why"),
    [(None, "cannot read"), (b"[1, 2", "no longer a spec"), (b"name: x\n", "KeyError")],
)
def test_an_accepted_spec_that_is_gone_or_damaged_is_one_error(
    tmp_path: Path, content: bytes | None, why: str
) -> None:
    path = tmp_path / "spec.yaml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(AcceptedSpecUnreadable, match=why):
        load_accepted(path)


@pytest.mark.training
@pytest.mark.timeout(900)
def test_a_run_accepted_under_older_rules_trains_pushes_and_lets_the_machine_end(
    tmp_path: Path, make_daemon, daemon_dirs
) -> None:  # type: ignore[no-untyped-def]
    state, _ = daemon_dirs
    _accepted_long_ago(tmp_path, state)
    daemon: DaemonProc = make_daemon()
    daemon.start("--once")
    assert daemon.wait(timeout=2 * TRAIN_BOUND) == 0, daemon.output
    record = daemon.record(NAME)
    assert record is not None
    assert record["termination"] == "completed", daemon.output
    assert "NO_PROXY" not in daemon.output  # never judged again, so never refused
    pushed = json.loads((state / "jobs" / NAME / "pushed.json").read_text())
    assert any(f["path"] == "weights/last.pt" for f in pushed["files"]), pushed
    # The machine's end reads the spec too: its weights verified, nothing blocks it.
    verdict = machine_verdict(StateLayout(state))
    assert verdict.verdict == "safe", verdict.why
