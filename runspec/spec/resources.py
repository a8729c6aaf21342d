"""The spec's `resources:` block: what an engine rents (GPUs per node, nodes, spot, disk).

Read by `runspec export` and `runspec launch`; a run on one box reads only `nodes`. Its rules
read the plain values as runspec.spec.rules does, and say (path, message); the rules module
turns them into findings. `processes` is shared with the batch rule: the global batch is split
across every training process of every node.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from runspec.spec.model import ResourcesSpec
from runspec.units import SIZE_PATTERN, parse_size

_GPUS = re.compile(r"([A-Za-z][A-Za-z0-9_.-]{0,31})(?::([1-9][0-9]?))?")

Said = tuple[tuple[str, ...], str]


def parse_gpus(value: Any) -> tuple[str, int] | None:
    """("H100", 8) from "H100:8" (a bare name is one GPU); None for anything else."""
    if not isinstance(value, str):
        return None
    match = _GPUS.fullmatch(value)
    if match is None:
        return None
    return match.group(1), int(match.group(2) or 1)


def _block(data: dict[str, Any]) -> dict[str, Any]:
    block = data.get("resources")
    return block if isinstance(block, dict) else {}


def node_count(data: dict[str, Any]) -> int:
    nodes = _block(data).get("nodes", 1)
    valid = isinstance(nodes, int) and not isinstance(nodes, bool) and nodes >= 1
    return nodes if valid else 1


def processes(data: dict[str, Any], listed: int | None) -> tuple[int, str] | None:
    """How many training processes the global batch is split across, and how to say it;
    None where only the machine knows (device all and no resources.gpus). `listed`: the
    number of GPUs train.device lists, if it lists them."""
    train = data.get("train")
    device = train.get("device", "all") if isinstance(train, dict) else "all"
    nodes = node_count(data)
    asked = parse_gpus(_block(data).get("gpus"))
    if device == "cpu":
        if nodes == 1:
            return None
        return nodes, f"{nodes} cpu processes, one on each of {nodes} nodes"
    per_node = listed if listed is not None else (asked[1] if asked else None)
    if per_node is None:
        return None
    total = per_node * nodes
    if nodes == 1:
        return total, f"{total} GPUs"
    return total, f"{total} GPUs on {nodes} nodes of {per_node}"


def problems(data: dict[str, Any], listed: list[int] | None) -> Iterator[Said]:
    """The resources rules beyond the schema. `listed`: the GPU indices train.device names."""
    block = _block(data)
    asked = parse_gpus(block.get("gpus"))
    train = data.get("train")
    device = train.get("device", "all") if isinstance(train, dict) else "all"
    if asked is not None and device == "cpu":
        yield (
            ("resources", "gpus"),
            f"gpus {block['gpus']} rents GPUs that train.device cpu leaves idle: train on "
            "them (device all) or drop resources.gpus",
        )
    elif asked is not None and listed is not None and set(listed) != set(range(asked[1])):
        count = asked[1]
        yield (
            ("train", "device"),
            f"device {device} does not match resources.gpus {block['gpus']}: each node has "
            f"{count} GPUs, 0 to {count - 1}, and every rented GPU should train: use device all",
        )
    disk = block.get("disk")
    if isinstance(disk, str) and re.fullmatch(SIZE_PATTERN, disk):
        try:
            parse_size(disk)
        except ValueError:
            yield (
                ("resources", "disk"),
                f"{disk!r} is not a positive size: use e.g. 200GB or 500GiB",
            )


def build_resources(block: dict[str, Any] | None) -> ResourcesSpec:
    if not block:
        return ResourcesSpec()
    asked = parse_gpus(block.get("gpus"))
    disk = block.get("disk")
    return ResourcesSpec(
        gpu_name=asked[0] if asked else None,
        gpus_per_node=asked[1] if asked else 0,
        nodes=int(block.get("nodes", 1)),
        spot=bool(block.get("spot", False)),
        disk=None if disk is None else parse_size(disk),
    )
