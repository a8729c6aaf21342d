"""The nodes an engine gave this run, read from its variables, and torchrun's options for them.

SkyPilot sets `SKYPILOT_NODE_RANK`, `SKYPILOT_NODE_IPS` (one per line, the head first),
`SKYPILOT_NUM_NODES` and `SKYPILOT_NUM_GPUS_PER_NODE` on every node; dstack sets
`DSTACK_NODE_RANK`, `DSTACK_MASTER_NODE_IP`, `DSTACK_NODES_NUM` and `DSTACK_GPUS_PER_NODE`.
torchrun wants `--nnodes`, `--node_rank`, `--master_addr`, `--master_port` (MASTER_PORT when
set) and `--nproc_per_node`: one process per GPU, one per node when the spec trains on the CPU.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from runspec.engines.onbox import Engine
from runspec.errors import UsageError
from runspec.spec.model import BudgetFit, Spec

DEFAULT_PORT = 29500  # torchrun's own default
# The rendezvous's run id, which prefixes every key of the run in node 0's TCPStore: torch's
# store has no password and listens on every interface (torch/csrc/distributed/c10d's
# TCPStore binds the wildcard address; static_tcp_rendezvous.py wraps it in
# PrefixStore(run_id)), so a node that cannot name the run id joins nothing of the run.
SECRET_ENV = "RUNSPEC_RENDEZVOUS_SECRET"  # else the Hub token every node holds keys it

# (rank, node count, GPUs per node, the head's address) by engine; the head's address is the
# first line of SkyPilot's list, or dstack's own variable.
VARIABLES = {
    Engine.SKYPILOT: (
        "SKYPILOT_NODE_RANK",
        "SKYPILOT_NUM_NODES",
        "SKYPILOT_NUM_GPUS_PER_NODE",
        "SKYPILOT_NODE_IPS",
    ),
    Engine.DSTACK: (
        "DSTACK_NODE_RANK",
        "DSTACK_NODES_NUM",
        "DSTACK_GPUS_PER_NODE",
        "DSTACK_MASTER_NODE_IP",
    ),
}


@dataclass(frozen=True)
class NodeLayout:
    nnodes: int
    node_rank: int
    master_addr: str
    master_port: int
    nproc_per_node: int

    @property
    def head(self) -> bool:
        """Node 0: its runspec owns the budget, the pushes and the verdict."""
        return self.node_rank == 0

    def torchrun_args(self) -> list[str]:
        return [
            f"--nnodes={self.nnodes}",
            f"--node_rank={self.node_rank}",
            f"--master_addr={self.master_addr}",
            f"--master_port={self.master_port}",
            f"--nproc_per_node={self.nproc_per_node}",
        ]


def rendezvous_id(environ: Mapping[str, str], task_id: str | None, name: str) -> str | None:
    """The run's rendezvous id: an HMAC of the task and the run keyed by a secret every node
    has (RUNSPEC_RENDEZVOUS_SECRET, else the Hub token) and no stranger can name; None when
    no node-wide secret is set (the rendezvous is then open to whoever reaches node 0)."""
    key = environ.get(SECRET_ENV, "").strip() or environ.get("HF_TOKEN", "").strip()
    if not key:
        return None
    message = f"runspec rendezvous\0{task_id or ''}\0{name}".encode()
    return "runspec-" + hmac.new(key.encode(), message, hashlib.sha256).hexdigest()[:32]


def _int(environ: Mapping[str, str], name: str, default: int, least: int) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{name}={raw!r} is not a whole number") from None
    if value < least:
        raise UsageError(f"{name}={value} is below {least}")
    return value


def node_layout(
    environ: Mapping[str, str], engine: Engine | None, *, cpu: bool, spec_nodes: int = 1
) -> NodeLayout:
    """This node's place in the run: the engine's variables where it sets them, else one node
    (or `spec_nodes`, which must then agree with what the engine says)."""
    names = VARIABLES.get(engine) if engine is not None else None
    port = _int(environ, "MASTER_PORT", DEFAULT_PORT, 1)
    if names is None:
        if spec_nodes > 1:
            raise UsageError(
                f"resources.nodes is {spec_nodes}, but no engine says which node this is: "
                "run it under SkyPilot or dstack (runspec export)"
            )
        return NodeLayout(1, 0, "127.0.0.1", port, 1)
    rank_var, count_var, gpus_var, head_var = names
    nnodes = _int(environ, count_var, spec_nodes, 1)
    rank = _int(environ, rank_var, 0, 0)
    if rank >= nnodes:
        raise UsageError(f"{rank_var}={rank}, but {count_var} says {nnodes} node(s)")
    if spec_nodes > 1 and nnodes != spec_nodes:
        raise UsageError(f"resources.nodes is {spec_nodes}, but {count_var} says {nnodes}")
    heads = [line.strip() for line in environ.get(head_var, "").splitlines() if line.strip()]
    if nnodes > 1 and not heads:
        raise UsageError(f"{head_var} is not set: the nodes cannot find node 0")
    gpus = 1 if cpu else _int(environ, gpus_var, 1, 1)
    return NodeLayout(nnodes, rank, heads[0] if heads else "127.0.0.1", port, gpus)


def unfitted(spec: Spec) -> tuple[Spec, str | None]:
    """Node 0's spec for a run across nodes: its schedule is never fitted to the budget. The
    profile runs on node 0 alone, and the followers' ranks start with the spec's epochs before
    node 0 could tell them another count: ranks planning different schedules would part at the
    end. The budget's stop still guards the deadline. The line to say, when the spec would have
    fitted."""
    if not spec.preflight.profile or spec.budget.fit is BudgetFit.NONE:
        return spec, None
    budget = dataclasses.replace(spec.budget, fit=BudgetFit.NONE)
    line = (
        f"budget.fit: not across nodes: every node trains the spec's {spec.train.epochs} "
        "epochs, and the budget's stop guards the deadline"
    )
    return dataclasses.replace(spec, budget=budget), line
