"""The control folder: how the supervisor and the trainer talk, through files only.

Files, not signals or pipes, because under multi-GPU the code that can stop training is a
callback in LibreYOLO's rank-0 worker, two processes away from whoever got the signal, and
because the trainer must keep obeying after its supervisor died or restarted.

    <control_dir>/stop        a stop request; its text is the reason
    <control_dir>/deadline    the wall time (UTC) training must have stopped by
    <control_dir>/epoch.json  the epoch marker, written by the trainer at each epoch end
    <control_dir>/stopping    written by the callback as it stops training (the reason)
    <control_dir>/result.json how the trainer ended, written just before it exits

The trainer's job (`TrainJob`, the JSON it is started with) is part of the same contract. Light:
the daemon and the pusher import this without torch, and the trainer imports it without any
of the parent's side (launcher, lifecycle, daemon).
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from runspec.errors import Cause
from runspec.spec.model import Spec
from runspec.store.atomic import write_text
from runspec.store.paths import RunPaths

STOP_FILE = "stop"
DEADLINE_FILE = "deadline"
EPOCH_MARKER_FILE = "epoch.json"
RESULT_FILE = "result.json"
STOPPING_FILE = "stopping"
TRAINER_LOCK_FILE = "trainer.lock"  # held by the one live trainer of the run
CONSOLE_LOG = "console.log"  # the trainer's stdout and stderr, in the run folder

# The trainer's exit codes; result.json says the same in words.
EXIT_COMPLETED = 0
EXIT_FAILED = 1
EXIT_BAD_JOB = 2
EXIT_STOPPED = 3
# How the trainer says it died of a full disk, for people (result.json's no_space decides).
NO_SPACE = "No space left on device"
EXIT_DUPLICATE = 4  # another trainer holds the run's trainer lock: this one never started
EXIT_SECOND_SIGNAL = 143  # 128 + SIGTERM: a second signal ends the trainer at once


@dataclass(frozen=True)
class TrainJob:
    """Everything the trainer program needs, written as JSON beside the run's record."""

    name: str
    model: str
    data: str  # the data.yaml, absolute
    epochs: int
    batch: int
    imgsz: int | tuple[int, int]
    device: str  # "cpu", "all" or GPU indices "0,1"
    save_period: int
    project: str  # LibreYOLO's project folder; the run folder is project/name
    control_dir: str
    # The persistent weights cache every run shares: where model names and relative checkpoint
    # paths resolve (runspec.trainer.modelbuild). Not the working directory: that is the run
    # folder, so nothing another run left in the cache is where this trainer starts.
    weights_cache: str
    log: str  # where the trainer's stdout/stderr go
    args: dict[str, Any] = field(default_factory=dict)  # other LibreYOLO train options
    env: dict[str, str] = field(default_factory=dict)  # extra, non-secret environment
    resume_from: str | None = None

    @property
    def run_dir(self) -> Path:
        return Path(self.project) / self.name

    @classmethod
    def from_spec(
        cls,
        spec: Spec,
        paths: RunPaths,
        data_yaml: Path,
        resume_from: Path | None = None,
        epochs: int | None = None,
    ) -> TrainJob:
        """`epochs`: what LibreYOLO plans its schedule with, when not train.epochs (the
        budget's fit, runspec.budgetfit)."""
        t = spec.train
        return cls(
            name=spec.name,
            model=t.model,
            data=str(Path(data_yaml).resolve()),
            epochs=t.epochs if epochs is None else epochs,
            batch=t.batch,
            imgsz=t.imgsz,
            device=t.device,
            save_period=t.save_period,
            project=str(paths.project.resolve()),
            control_dir=str(paths.control_dir.resolve()),
            weights_cache=str(paths.weights_cache.resolve()),
            log=str((paths.run_dir / CONSOLE_LOG).resolve()),
            args=dict(t.args),
            env=dict(spec.env),
            resume_from=None if resume_from is None else str(Path(resume_from).resolve()),
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if isinstance(self.imgsz, tuple):
            data["imgsz"] = list(self.imgsz)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainJob:
        values = dict(data)
        if "work_dir" in values:  # written by a runspec before the field was renamed
            values["weights_cache"] = values.pop("work_dir")
        if isinstance(values.get("imgsz"), list):
            values["imgsz"] = tuple(values["imgsz"])
        return cls(**values)

    def write(self, path: Path) -> None:
        write_text(path, json.dumps(self.to_json(), indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> TrainJob:
        return cls.from_json(json.loads(path.read_text()))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        # A file we cannot parse is treated as absent: every writer here is atomic, so this
        # only happens when something else scribbled in the folder.
        return None


# --- stop request ---------------------------------------------------------------------------


def request_stop(control_dir: Path, reason: str) -> None:
    """Ask the trainer to stop at the next epoch boundary. The first reason given wins."""
    if (control_dir / STOP_FILE).exists():
        return
    write_text(control_dir / STOP_FILE, reason.strip() or "stop requested")


def stop_requested(control_dir: Path) -> str | None:
    """The reason of a pending stop request, or None."""
    try:
        text = (control_dir / STOP_FILE).read_text().strip()
    except FileNotFoundError:
        return None
    return text or "stop requested"


def clear_stop(control_dir: Path) -> None:
    (control_dir / STOP_FILE).unlink(missing_ok=True)


# --- deadline -------------------------------------------------------------------------------


def write_deadline(
    control_dir: Path,
    ts: float,
    next_epoch_s: dict[str, float] | None = None,
    run_deadline: float | None = None,
) -> None:
    """The wall time (epoch seconds) by which the trainer must have stopped, and the
    planner's prediction of the next epoch's length by kind (`validating`, `plain`): the
    trainer decides at the boundary, where no request from outside arrives in time, with the
    planner's own figures. `run_deadline`: the run's own deadline (the stop time plus the
    reserve), kept so a record rebuilt from this folder keeps the run's whole budget."""
    iso = datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="seconds")
    data: dict[str, Any] = {"deadline": ts, "utc": iso, "next_epoch_s": next_epoch_s or {}}
    if run_deadline is not None:
        data["run_deadline"] = run_deadline
    write_text(control_dir / DEADLINE_FILE, json.dumps(data) + "\n")


def read_deadline(control_dir: Path, key: str = "deadline") -> float | None:
    """The trainer's stop time; `key="run_deadline"`: the run's own deadline (None in a
    folder an older runspec wrote)."""
    data = _read_json(control_dir / DEADLINE_FILE)
    if not isinstance(data, dict):
        return None
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def read_next_epoch(control_dir: Path, validating: bool) -> float | None:
    """The planner's prediction of the next epoch's length for its kind, if it made one."""
    data = _read_json(control_dir / DEADLINE_FILE)
    guesses = data.get("next_epoch_s") if isinstance(data, dict) else None
    value = (
        guesses.get("validating" if validating else "plain") if isinstance(guesses, dict) else None
    )
    return float(value) if isinstance(value, int | float) else None


# --- epoch marker ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileStat:
        st = path.stat()
        return cls(size=st.st_size, mtime_ns=st.st_mtime_ns)


@dataclass(frozen=True)
class EpochMarker:
    """What the trainer saw at the end of an epoch, after LibreYOLO saved its checkpoints.

    `files` maps run-relative paths (`weights/last.pt`) to their size and mtime then: a file
    that still has both is the complete checkpoint of that epoch, not a half-written one.
    `file_epochs`: a file unchanged since an earlier marker's epoch (best.pt, rewritten only
    when the metric improves) holds that epoch (write_epoch_marker carries it).
    """

    epoch: int
    total_epochs: int
    epoch_seconds: float
    validated: bool
    time: float
    files: dict[str, FileStat] = field(default_factory=dict)
    file_epochs: dict[str, int] = field(default_factory=dict)

    def epoch_of(self, relpath: str) -> int:
        return self.file_epochs.get(relpath, self.epoch)

    def to_json(self) -> dict[str, Any]:
        return {
            "file_epochs": dict(sorted(self.file_epochs.items())),
            "epoch": self.epoch,
            "total_epochs": self.total_epochs,
            "epoch_seconds": self.epoch_seconds,
            "validated": self.validated,
            "time": self.time,
            "files": {
                rel: {"size": st.size, "mtime_ns": st.mtime_ns}
                for rel, st in sorted(self.files.items())
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EpochMarker:
        files = {
            str(rel): FileStat(size=int(st["size"]), mtime_ns=int(st["mtime_ns"]))
            for rel, st in dict(data.get("files") or {}).items()
        }
        return cls(
            epoch=int(data["epoch"]),
            total_epochs=int(data["total_epochs"]),
            epoch_seconds=float(data["epoch_seconds"]),
            validated=bool(data["validated"]),
            time=float(data["time"]),
            files=files,
            file_epochs={
                str(rel): int(epoch)
                for rel, epoch in dict(data.get("file_epochs") or {}).items()
                if str(rel) in files and 0 <= int(epoch) <= int(data["epoch"])
            },
        )


def carry_file_epochs(marker: EpochMarker, previous: EpochMarker | None) -> EpochMarker:
    """`marker` with the epoch each file holds: one exactly as `previous` saw it holds the
    epoch it held then (never newer than this marker's); any other, this marker's epoch."""
    same = [r for r, st in marker.files.items() if previous and previous.files.get(r) == st]
    kept = {r: min(previous.epoch_of(r), marker.epoch) for r in same if previous is not None}
    return replace(marker, file_epochs={r: e for r, e in kept.items() if e < marker.epoch})


def write_epoch_marker(control_dir: Path, marker: EpochMarker) -> None:
    marker = carry_file_epochs(marker, read_epoch_marker(control_dir))
    write_text(control_dir / EPOCH_MARKER_FILE, json.dumps(marker.to_json()) + "\n")


def read_epoch_marker(control_dir: Path) -> EpochMarker | None:
    data = _read_json(control_dir / EPOCH_MARKER_FILE)
    if not isinstance(data, dict):
        return None
    try:
        return EpochMarker.from_json(data)
    except (KeyError, TypeError, ValueError):
        return None


def mark_stopping(control_dir: Path, reason: str, detail: str = "") -> None:
    """The callback's note that it is ending training on purpose. Under multi-GPU the trainer
    only sees the coordinator's generic failure; this file says it was a stop, and why.
    `reason` is the stop request's text verbatim (or "deadline"); `detail` is for people."""
    write_text(control_dir / STOPPING_FILE, json.dumps({"reason": reason, "detail": detail}))


def read_stopping(control_dir: Path) -> tuple[str, str] | None:
    """(reason, detail) when the callback stopped training on purpose, else None."""
    data = _read_json(control_dir / STOPPING_FILE)
    if not isinstance(data, dict):
        return None
    return str(data.get("reason") or "stopped"), str(data.get("detail") or "")


# --- result ---------------------------------------------------------------------------------


class TrainerOutcome(str, enum.Enum):
    COMPLETED = "completed"  # LibreYOLO trained every epoch (or stopped early on patience)
    STOPPED = "stopped"  # stopped at an epoch boundary on request or at the deadline
    FAILED = "failed"  # LibreYOLO raised; retrying would fail the same way
    KILLED = "killed"  # gone without a word: a signal, the OOM killer, a reboot


@dataclass(frozen=True)
class TrainerResult:
    outcome: TrainerOutcome
    # stopped: the stop request's text verbatim ("budget", "cancel", ...) or "deadline";
    # failed: "Type: message"; killed: what is known of how it died.
    reason: str = ""
    error_type: str = ""  # LibreYOLO's exception type (failed)
    error_message: str = ""
    epochs_completed: int = 0
    save_dir: str = ""
    exit_code: int | None = None
    detail: str = ""  # a sentence for people: "stop requested (budget) after epoch 7"
    cause: Cause | None = None  # failed: this machine's fault (runspec.trainer.faults)
    # failed: a write met a full disk (runspec.trainer.faults.out_of_space); a file from
    # before the field reads False, and the disk's room then decides (runspec.run.exitstep).
    no_space: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "reason": self.reason,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "epochs_completed": self.epochs_completed,
            "save_dir": self.save_dir,
            "exit_code": self.exit_code,
            "detail": self.detail,
            "cause": self.cause.value if self.cause is not None else None,
            "no_space": self.no_space,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainerResult:
        code = data.get("exit_code")
        return cls(
            outcome=TrainerOutcome(data["outcome"]),
            reason=str(data.get("reason", "")),
            error_type=str(data.get("error_type", "")),
            error_message=str(data.get("error_message", "")),
            epochs_completed=int(data.get("epochs_completed", 0)),
            save_dir=str(data.get("save_dir", "")),
            exit_code=None if code is None else int(code),
            detail=str(data.get("detail", "")),
            cause=Cause(data["cause"]) if data.get("cause") is not None else None,
            no_space=data.get("no_space") is True,
        )


def write_result(control_dir: Path, result: TrainerResult) -> None:
    write_text(control_dir / RESULT_FILE, json.dumps(result.to_json()) + "\n")


def read_result(control_dir: Path) -> TrainerResult | None:
    """The result the trainer wrote as it exited; None while it runs or if it was killed."""
    data = _read_json(control_dir / RESULT_FILE)
    if not isinstance(data, dict):
        return None
    try:
        return TrainerResult.from_json(data)
    except (KeyError, TypeError, ValueError):
        return None


def clear_for_launch(control_dir: Path) -> None:
    """Forget the previous trainer's stop request and result before a (re)launch.

    The deadline stays (it belongs to the run, not to one trainer) and so does the epoch
    marker: its stats no longer match once the new trainer rewrites a file, so it can never
    vouch for a file the new trainer is writing.
    """
    control_dir.mkdir(parents=True, exist_ok=True)
    clear_stop(control_dir)
    (control_dir / STOPPING_FILE).unlink(missing_ok=True)
    (control_dir / RESULT_FILE).unlink(missing_ok=True)
