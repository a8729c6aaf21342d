"""The nodes an engine gives a run: its variables mapped to torchrun's options (the runs
across nodes themselves are in test_engine_multinode.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runspec.engines.nodes import NodeLayout, node_layout
from runspec.engines.onbox import Engine
from runspec.errors import UsageError
from tests.fixtures_run import SpecWriter


def test_skypilot_variables_map_to_torchrun() -> None:
    env = {
        "SKYPILOT_NODE_RANK": "1",
        "SKYPILOT_NODE_IPS": "10.0.0.4\n10.0.0.5\n",
        "SKYPILOT_NUM_NODES": "2",
        "SKYPILOT_NUM_GPUS_PER_NODE": "8",
    }
    layout = node_layout(env, Engine.SKYPILOT, cpu=False)
    assert layout == NodeLayout(2, 1, "10.0.0.4", 29500, 8) and not layout.head
    assert layout.torchrun_args() == [
        "--nnodes=2",
        "--node_rank=1",
        "--master_addr=10.0.0.4",
        "--master_port=29500",
        "--nproc_per_node=8",
    ]
    # train.device: cpu is one process per node, whatever the GPUs; MASTER_PORT is honoured.
    cpu = node_layout({**env, "MASTER_PORT": "31337"}, Engine.SKYPILOT, cpu=True)
    assert (cpu.nproc_per_node, cpu.master_port) == (1, 31337)


def test_dstack_variables_map_to_torchrun() -> None:
    env = {
        "DSTACK_NODE_RANK": "0",
        "DSTACK_MASTER_NODE_IP": "192.168.7.2",
        "DSTACK_NODES_NUM": "4",
        "DSTACK_GPUS_PER_NODE": "2",
    }
    layout = node_layout(env, Engine.DSTACK, cpu=False, spec_nodes=4)
    assert layout == NodeLayout(4, 0, "192.168.7.2", 29500, 2) and layout.head


def test_one_node_without_an_engine_or_its_variables() -> None:
    assert node_layout({}, None, cpu=True).nnodes == 1
    assert node_layout({"DSTACK_RUN_ID": "x"}, Engine.DSTACK, cpu=True).nnodes == 1
    assert node_layout({}, Engine.HF_JOBS, cpu=False).nnodes == 1


@pytest.mark.parametrize(
    ("env", "engine", "spec_nodes", "words"),
    [
        ({}, None, 2, "no engine says which node this is"),
        ({"DSTACK_NODES_NUM": "2", "DSTACK_NODE_RANK": "0"}, Engine.DSTACK, 1,
         "DSTACK_MASTER_NODE_IP is not set"),
        ({"DSTACK_NODES_NUM": "2", "DSTACK_NODE_RANK": "2", "DSTACK_MASTER_NODE_IP": "h"},
         Engine.DSTACK, 1, "DSTACK_NODE_RANK=2, but DSTACK_NODES_NUM says 2"),
        ({"SKYPILOT_NUM_NODES": "3", "SKYPILOT_NODE_IPS": "h"}, Engine.SKYPILOT, 2,
         "resources.nodes is 2, but SKYPILOT_NUM_NODES says 3"),
        ({"SKYPILOT_NUM_NODES": "two"}, Engine.SKYPILOT, 1, "is not a whole number"),
        ({"MASTER_PORT": "0"}, None, 1, "MASTER_PORT=0 is below 1"),
    ],
)  # fmt: skip
def test_variables_that_contradict_each_other_are_refused(
    env: dict[str, str], engine: Engine | None, spec_nodes: int, words: str
) -> None:
    with pytest.raises(UsageError, match=words):
        node_layout(env, engine, cpu=True, spec_nodes=spec_nodes)


def test_a_single_box_reads_no_node_variables(
    tmp_path: Path, write_spec: SpecWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runspec.commands.run import node_plan
    from runspec.engines.onbox import detect
    from runspec.spec.loader import load_spec

    spec = load_spec(write_spec("single"), tmp_path / "state")
    # Whatever a single box's environment holds for other tools, no engine: nothing is read.
    monkeypatch.setenv("MASTER_PORT", "not-a-port")
    monkeypatch.setenv("SKYPILOT_NUM_NODES", "4")
    assert node_plan(spec, None) is None
    with pytest.raises(UsageError, match="MASTER_PORT='not-a-port' is not a whole number"):
        node_plan(spec, detect({"DSTACK_RUN_ID": "r"}))


def test_a_run_across_nodes_never_fits_its_schedule_and_says_so(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    """The profile runs on node 0 alone and the followers' ranks start with the spec's epochs:
    a fitted node 0 would plan another schedule than its peers."""
    from runspec.engines.nodes import unfitted
    from runspec.spec.loader import load_spec
    from runspec.spec.model import BudgetFit

    profiled = load_spec(
        write_spec("wide", epochs=40, preflight={"profile": True}), tmp_path / "state"
    )
    spec, said = unfitted(profiled)
    assert spec.budget.fit is BudgetFit.NONE and profiled.budget.fit is not BudgetFit.NONE
    assert said is not None and "not across nodes" in said and "40 epochs" in said
    assert spec.sha256 == profiled.sha256  # the accepted spec is the same spec
    plain = load_spec(write_spec("plain", epochs=40), tmp_path / "state")
    assert unfitted(plain) == (plain, None)  # no profile: nothing would be fitted
