"""The validated run spec as frozen, typed objects.

After validation nothing reads the raw YAML dict again: every later stage takes a `Spec`.
Durations are seconds (float), sizes are bytes (int), paths are `Path`. Optional paths that
default to somewhere under the state folder stay `None` here; `RunPaths` resolves them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any


def _frozen_map(items: Mapping[str, object] | None = None) -> Mapping[str, object]:
    return MappingProxyType(dict(items or {}))


@dataclass(frozen=True)
class HubDataset:
    repo: str
    file: str
    revision: str | None = None


@dataclass(frozen=True)
class SyntheticDataset:
    train: int = 8
    val: int = 4
    imgsz: int = 128
    classes: int = 3
    seed: int = 0


@dataclass(frozen=True)
class DatasetSpec:
    """Exactly one of hub, path, synthetic is set."""

    hub: HubDataset | None = None
    path: Path | None = None
    synthetic: SyntheticDataset | None = None
    extract_to: Path | None = None  # None: <state>/data
    data: str | None = None  # the data.yaml relative to extract_to (hub only)
    max_files: int = 200_000  # the most members its tar may hold (hub only)


@dataclass(frozen=True)
class TrainSpec:
    model: str
    epochs: int
    batch: int = 16
    imgsz: int | tuple[int, int] = 640  # an int, or (height, width)
    device: str = "all"  # "cpu", "all", or a comma list of GPU indices ("0", "0,1,2,3")
    save_period: int = 10
    restarts: int = 2
    args: Mapping[str, object] = field(default_factory=_frozen_map)  # keys use underscores

    @property
    def gpu_ids(self) -> tuple[int, ...] | None:
        """The GPU indices asked for; None for "cpu" and "all"."""
        if self.device in ("cpu", "all"):
            return None
        return tuple(int(part) for part in self.device.split(","))


@dataclass(frozen=True)
class OutputSpec:
    project: Path | None = None  # None: <state>/runs


@dataclass(frozen=True)
class HubTarget:
    repo: str
    private: bool = True
    reuse: bool = False  # may push to a repo that holds another run's files


DEFAULT_PUSH_FILES: tuple[str, ...] = (
    "weights/best.pt",
    "weights/last.pt",
    "weights/epoch_*.pt",
    "status.json",
    "metrics.jsonl",
    "results.csv",
    "summary.json",
    "train_config.yaml",
    "train.log",
)


@dataclass(frozen=True)
class PushSpec:
    """Exactly one of hub, dir is set."""

    hub: HubTarget | None = None
    dir: Path | None = None
    every: float = 900.0
    files: tuple[str, ...] = DEFAULT_PUSH_FILES
    # The final push downloads the final weights again and hashes them ("readback"), or
    # trusts the target's record of them ("metadata"). The loader resolves the default.
    read_back: bool = False


class BudgetFit(str, enum.Enum):
    EPOCHS = "epochs"  # LibreYOLO's schedule planned for the epochs the budget holds
    NONE = "none"  # train.epochs stands; the budget cuts the schedule where it runs out


@dataclass(frozen=True)
class BudgetSpec:
    wall_clock: float
    reserve: float | None = None  # None: auto, from the measured upload speed
    overrun: float = 1200.0
    hourly_cost: float | None = None
    # None: not said; it fits the epochs whenever the profile measured them.
    fit: BudgetFit | None = None


class FinishAction(str, enum.Enum):
    NONE = "none"
    COMMAND = "command"
    POWEROFF = "poweroff"
    STOP = "stop"
    DESTROY = "destroy"
    AUTO = "auto"


class Unverified(str, enum.Enum):
    STOP = "stop"
    KEEP = "keep"
    POWEROFF = "poweroff"


@dataclass(frozen=True)
class StorageSpec:
    allocated_gb: float
    usd_per_gb_month: float
    rebuild_usd: float
    return_within: float  # seconds


@dataclass(frozen=True)
class FinishSpec:
    action: FinishAction = FinishAction.NONE
    provider: str = "auto"  # auto | vast | runpod | lambda | aws | gcp | hetzner
    command: tuple[str, ...] = ()
    unverified: Unverified = Unverified.STOP
    storage: StorageSpec | None = None

    def to_json(self) -> dict[str, Any]:
        """As runspec.machine.endgame keeps an armed finish in machine.json."""
        data = asdict(self)
        data["action"] = self.action.value
        data["unverified"] = self.unverified.value
        data["command"] = list(self.command)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FinishSpec:
        storage = data.get("storage")
        return cls(
            action=FinishAction(data["action"]),
            provider=str(data.get("provider", "auto")),
            command=tuple(str(c) for c in data.get("command", ())),
            unverified=Unverified(data.get("unverified", "stop")),
            storage=StorageSpec(**storage) if isinstance(storage, dict) else None,
        )


@dataclass(frozen=True)
class WatchSpec:
    """The lease `runspec watch` reads (runspec.watch.lease); lease None: no lease."""

    lease: float | None = None


@dataclass(frozen=True)
class PreflightSpec:
    matmul: bool = True
    collective: bool = True
    disk: int | None = None  # None: auto; else bytes
    doctor: bool = True
    profile: bool = False


@dataclass(frozen=True)
class ResourcesSpec:
    """What an engine rents for the run (runspec export, runspec launch); one box reads only
    `nodes`."""

    gpu_name: str | None = None  # SkyPilot's accelerator name ("H100", "A100-80GB")
    gpus_per_node: int = 0  # 0: no GPU asked for
    nodes: int = 1
    spot: bool = False
    disk: int | None = None  # bytes, per node

    @property
    def gpus(self) -> str | None:
        """The request in SkyPilot's (and dstack's) NAME:COUNT form."""
        return None if self.gpu_name is None else f"{self.gpu_name}:{self.gpus_per_node}"


@dataclass(frozen=True)
class Spec:
    name: str
    dataset: DatasetSpec
    train: TrainSpec
    budget: BudgetSpec
    description: str = ""
    output: OutputSpec = OutputSpec()
    push: PushSpec | None = None
    finish: FinishSpec = FinishSpec()
    preflight: PreflightSpec = PreflightSpec()
    resources: ResourcesSpec = ResourcesSpec()
    watch: WatchSpec = WatchSpec()
    env: Mapping[str, str] = field(default_factory=_frozen_map)  # type: ignore[arg-type]
    # Notification URLs (apprise's format, ${NAME} from the daemon's environment); None: the
    # daemon config's.
    notify: tuple[str, ...] | None = None
    # Where it came from: the text as received and its sha256 (provenance).
    source: str = "<spec>"
    text: str = ""
    sha256: str = ""
