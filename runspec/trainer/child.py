"""The trainer: `python -m runspec.trainer --job JOB_JSON`, the one runspec program that imports
LibreYOLO.

It builds the model, calls LibreYOLO's `train` with the job's options and an explicit project,
name and `exist_ok`, and adds one callback. At each epoch end (after LibreYOLO saved that
epoch's checkpoints) the callback records the epoch marker, then stops training when the control
folder holds a stop request, or when another epoch as long as the longest so far would pass the
deadline there. SIGTERM/SIGINT only turn into a stop request file: under multi-GPU the callback
runs in LibreYOLO's rank-0 worker, not in this process. A SIGTERM while a stop is already
pending exits at once.

Before exiting it writes `<control_dir>/result.json` and exits with a code from
runspec.trainer.control.

torch and LibreYOLO are imported when training begins (inside `heavy_imports`), not with this
module. A trainer of a run across nodes only starts torchrun, whose ranks train: it imports
LibreYOLO only to fetch pretrained weights for them, and torch only for that or to read the
checkpoint a resume starts from, so it does not hold them for the whole run.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import signal
import sys
import traceback
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from runspec.budget import eval_interval_from_args, validates
from runspec.clock import SYSTEM, utc_iso
from runspec.store.locks import FileLock
from runspec.trainer import control, firststep, markers, multinode
from runspec.trainer.control import EpochMarker, FileStat, TrainerOutcome, TrainerResult, TrainJob
from runspec.trainer.faults import cause_of, cause_of_line, out_of_space, out_of_space_line
from runspec.trainer.heavyimports import heavy_imports
from runspec.trainer.safeload import UnsafeCheckpoint, trained_epochs
from runspec.trainer.sessionwalls import put_up_walls

# A hidden option for the tests: route training through LibreYOLO's multi-GPU coordinator with
# this many CPU ranks, so the path production takes with `device: "0,1,..."` runs without GPUs.
CPU_DDP_ENV = "RUNSPEC_TRAINER_CPU_DDP"


MIN_CHECKPOINT = 10_000_000  # bytes: less free than this, and no checkpoint can be written


class TrainingStopped(Exception):
    """Raised by the callback to end training at an epoch boundary, on purpose."""


def weights_files(run_dir: Path) -> dict[str, FileStat]:
    """Size and mtime of every weights/*.pt of the run folder, by run-relative path."""
    weights = run_dir / "weights"
    files: dict[str, FileStat] = {}
    for path in sorted(weights.glob("*.pt")) if weights.is_dir() else []:
        try:
            files[f"weights/{path.name}"] = FileStat.of(path)
        except OSError:
            continue
    return files


class StopControl:
    """LibreYOLO callback. Module-level and plain so it pickles into the rank-0 worker."""

    def __init__(self, control_dir: str, eval_interval: int = 10) -> None:
        self.control_dir = control_dir
        self.eval_interval = eval_interval
        self.longest_epoch = 0.0
        self.last_end: float | None = None

    def on_train_start(self, event: Any) -> None:
        self.last_end = SYSTEM.time()
        firststep.note(Path(self.control_dir), self.last_end)

    def on_train_epoch_end(self, event: Any) -> None:
        now = SYSTEM.time()
        ctl = Path(self.control_dir)
        files = weights_files(Path(event.save_dir))
        # The whole epoch as the deadline sees it: training, validation and checkpoint saves.
        took = float(event.epoch_seconds)
        if self.last_end is not None:
            took = max(took, now - self.last_end)
        self.last_end = now
        self.longest_epoch = max(self.longest_epoch, took)
        markers.mark(
            ctl,
            EpochMarker(
                epoch=int(event.epoch),
                total_epochs=int(event.total_epochs),
                epoch_seconds=took,
                validated=bool(event.validated),
                time=now,
                files=files,
            ),
        )
        if event.epoch >= event.total_epochs:
            return  # the last epoch: training ends anyway, as completed
        reason = control.stop_requested(ctl)
        detail = f"stop requested ({reason}); stopped after epoch {event.epoch}"
        if reason is None:
            deadline = control.read_deadline(ctl)
            # The planner's figure for the coming epoch's kind (validating or not, recent
            # epochs only); our own longest epoch until the planner has one.
            coming = validates(int(event.epoch) + 1, int(event.total_epochs), self.eval_interval)
            predicted = control.read_next_epoch(ctl, coming) or self.longest_epoch
            if deadline is not None and now + predicted > deadline:
                reason = "deadline"
                detail = (
                    f"another epoch (up to {predicted:.0f}s) would end after the "
                    f"stop time; stopped after epoch {event.epoch}"
                )
        if reason is not None:
            control.mark_stopping(ctl, reason, detail)
            raise TrainingStopped(detail)


class _Signals:
    """First SIGTERM/SIGINT: a stop request file. One while a stop is pending: exit now."""

    def __init__(self, control_dir: Path) -> None:
        self.control_dir = control_dir

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if (self.control_dir / control.STOP_FILE).exists():
            os._exit(control.EXIT_SECOND_SIGNAL)
        control.request_stop(self.control_dir, f"{signal.Signals(signum).name} to the trainer")


def resumed_batch(job: TrainJob) -> int:
    """The batch to train with. A resumed `batch: -1` run keeps the batch AutoBatch picked when
    it began (train_config.yaml, written before its first epoch): probing again after a crash
    would cost GPU seconds, and a card still holding the dead trainer's memory can make the
    probe fall back to 16, changing the run midway. -1 again when the file says nothing."""
    if job.resume_from is None or job.batch != -1:
        return job.batch
    try:
        config = yaml.safe_load((job.run_dir / "train_config.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return job.batch
    batch = config.get("batch") if isinstance(config, dict) else None
    return batch if isinstance(batch, int) and batch > 0 else job.batch


def train_kwargs(job: TrainJob, device: str, callback: StopControl) -> dict[str, Any]:
    from libreyolo.cli.aliases import train_aliases  # LibreYOLO: when training begins

    from runspec.trainer.modelbuild import weights_ref

    aliases = train_aliases(job.args.get("task"))
    kwargs: dict[str, Any] = {aliases.get(k, k): v for k, v in job.args.items()}
    kwargs.pop("pretrained", None)  # handled when the model is built
    kwargs.pop("task", None)
    teacher = kwargs.get("distill_model")
    if isinstance(teacher, str):  # relative to the weights cache, as the student's model is
        kwargs["distill_model"] = weights_ref(teacher, Path(job.weights_cache))
    kwargs.update(
        data=job.data,
        epochs=job.epochs,
        batch=resumed_batch(job),
        imgsz=list(job.imgsz) if isinstance(job.imgsz, tuple) else job.imgsz,
        device=device,
        save_period=job.save_period,
        project=job.project,
        name=job.name,
        exist_ok=True,
        callbacks=[callback],
    )
    if job.resume_from is not None:
        kwargs["resume"] = True
    if "save_plots" not in kwargs and importlib.util.find_spec("matplotlib") is not None:
        # LibreYOLO's own pictures of the last validation (val/plots/): the final push
        # carries them to the Hub with the weights (libreyolo[plots] brings matplotlib).
        kwargs["save_plots"] = True
    return kwargs


def _out_of_space(run_dir: Path) -> str | None:
    """How full the run folder's disk is, when too full to hold another checkpoint."""
    sizes = [p.stat().st_size for p in (run_dir / "weights").glob("*.pt") if p.is_file()]
    needed = max([*sizes, MIN_CHECKPOINT])
    try:
        free = shutil.disk_usage(run_dir).free
    except OSError:
        return None
    return f"{run_dir} has {free} bytes free" if free < needed else None


def _error_of(exc: BaseException) -> tuple[str, str]:
    """LibreYOLO's exception type and message; under multi-GPU the coordinator's RuntimeError
    carries the worker's traceback, whose last line names the real error."""
    text = str(exc)
    if isinstance(exc, RuntimeError) and "DDP coordinator exited" in text:
        for line in reversed(text.strip().splitlines()):
            match = re.match(
                r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Stopped)): ?(.*)$", line
            )
            if match:
                return match.group(1).rsplit(".", 1)[-1], match.group(2)
    first = text.strip().splitlines()[0] if text.strip() else ""
    return type(exc).__name__, first


def _vouch(ctl: Path, marker: EpochMarker, run_dir: Path) -> None:
    """With no writer left, the marker vouches for every weights file as it is now."""
    files = weights_files(run_dir)
    markers.mark(ctl, replace(marker, time=SYSTEM.time(), files=files))


def _already_done(job: TrainJob, ctl: Path, done: int | None) -> TrainerResult | None:
    """A checkpoint that holds every epoch (`done`; the trainer died after saving the last one,
    before its marker: a full disk, a kill) leaves nothing to resume, and LibreYOLO refuses to:
    the training is complete. The marker now vouches for those weights, so they are pushed."""
    if job.resume_from is None or done is None or done < job.epochs:
        return None
    marker = markers.newest_marker(ctl)
    if marker is None or marker.epoch < done:
        seconds = marker.epoch_seconds if marker is not None else 0.0
        marker = EpochMarker(
            epoch=done, total_epochs=job.epochs, epoch_seconds=seconds, validated=False, time=0.0
        )
    _vouch(ctl, marker, job.run_dir)
    print(f"runspec.trainer: {job.resume_from} already holds all {job.epochs} epochs", flush=True)
    return TrainerResult(
        outcome=TrainerOutcome.COMPLETED,
        epochs_completed=done,
        save_dir=str(job.run_dir),
        exit_code=control.EXIT_COMPLETED,
    )


def _refused(job: TrainJob, why: str) -> TrainerResult:
    print(f"runspec.trainer: {why}", file=sys.stderr, flush=True)
    return TrainerResult(
        outcome=TrainerOutcome.FAILED,
        reason=why,
        error_type=UnsafeCheckpoint.__name__,
        error_message=why,
        save_dir=str(job.run_dir),
        exit_code=control.EXIT_FAILED,
    )


def _exit_after_training(model: Any) -> None:
    """LibreYOLO's train() ends by loading best.pt back into the model, to leave it ready for
    inference. This child exits instead, so that full read of the checkpoint (1 to 2 s of CPU
    for yolo9-t, more for the large models and on a slow disk) would only hold the final push
    back. The files on disk are the same either way."""
    if callable(getattr(model, "_restore_after_training", None)):
        model._restore_after_training = lambda results: None


def run(job: TrainJob, job_file: Path | None = None) -> TrainerResult:
    ctl = Path(job.control_dir)
    ctl.mkdir(parents=True, exist_ok=True)
    handler = _Signals(ctl)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    os.environ.update(job.env)
    callback = StopControl(job.control_dir, eval_interval_from_args(job.args))
    try:
        # Before LibreYOLO (or a rank) loads it with plain pickle: data only, or refused.
        done = None if job.resume_from is None else trained_epochs(Path(job.resume_from))
    except UnsafeCheckpoint as exc:
        return _refused(job, str(exc))
    finished = _already_done(job, ctl, done)
    if finished is not None:
        return finished
    try:
        pretrained = job.args.get("pretrained", True)
        nodes = os.environ.get(multinode.NODES_ENV, "").strip()
        if nodes and job_file is not None:
            # The ranks build their own models. This one only fetches pretrained weights once
            # for them (on the CPU: no spare copy sits on rank 0's GPU for the whole run); a
            # model from scratch has nothing to fetch, nor has a resume (the ranks load its
            # checkpoint), and then LibreYOLO is never imported here.
            if pretrained is not False and job.resume_from is None:
                with heavy_imports():
                    from runspec.trainer.modelbuild import build_model
                build_model(job, "cpu", pretrained)
            multinode.torchrun_train(job_file, ctl, nodes)
            results = None
        else:
            with heavy_imports():
                from libreyolo.training.ddp_spawn import spawn_for_model

                from runspec.trainer.modelbuild import build_model, resolve_device
            device = resolve_device(job.device)
            model = build_model(job, device, pretrained)
            _exit_after_training(model)
            kwargs = train_kwargs(job, device, callback)
            ddp_ranks = int(os.environ.get(CPU_DDP_ENV, "0") or 0)
            if ddp_ranks > 1:
                kwargs.update(device="cpu", sync_bn=False)
                results = spawn_for_model(model, kwargs, ddp_ranks)
            else:
                results = model.train(**kwargs)
    except BaseException as exc:
        marker = markers.newest_marker(ctl)
        epochs = marker.epoch if marker is not None else 0
        stopping = control.read_stopping(ctl)
        peer = multinode.peer_stopped(ctl)
        if peer is not None and stopping is None:
            stopping = ("stopped", f"node 0 stopped the run: {peer}")
        if isinstance(exc, TrainingStopped) or stopping is not None:
            reason, detail = stopping or ("stopped", str(exc))
            return TrainerResult(
                outcome=TrainerOutcome.STOPPED,
                reason=reason,
                detail=detail,
                epochs_completed=epochs,
                save_dir=str(job.run_dir),
                exit_code=control.EXIT_STOPPED,
            )
        traceback.print_exc()
        error_type, message = _error_of(exc)
        reason = f"{error_type}: {message}" if message else error_type
        full = _out_of_space(job.run_dir)
        if full is not None:
            # torch.save says "unexpected pos ...", not ENOSPC: name the real cause, so the
            # supervisor waits for space instead of calling the run failed.
            reason = f"{control.NO_SPACE}: {full} ({reason})"
        no_space = full is not None or out_of_space(exc) or out_of_space_line(error_type, message)
        return TrainerResult(
            outcome=TrainerOutcome.FAILED,
            reason=reason,
            error_type=error_type,
            error_message=message,
            epochs_completed=epochs,
            save_dir=str(job.run_dir),
            exit_code=control.EXIT_FAILED,
            # The DDP coordinator's own error says nothing: then its worker's last line does.
            cause=cause_of(exc) or cause_of_line(error_type, message),
            no_space=no_space,
        )
    marker = markers.newest_marker(ctl)
    save_dir = results.get("save_dir") if isinstance(results, dict) else None
    if marker is not None:
        # LibreYOLO writes some weights after the last epoch's callback (average.pt with
        # average_best): vouch for them now that no writer is left, or they never count as
        # complete and are never pushed.
        _vouch(ctl, marker, Path(save_dir or job.run_dir))
    return TrainerResult(
        outcome=TrainerOutcome.COMPLETED,
        epochs_completed=marker.epoch if marker is not None else 0,
        save_dir=str(save_dir or job.run_dir),
        exit_code=control.EXIT_COMPLETED,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runspec.trainer")
    parser.add_argument("--job", type=Path, required=True, help="the TrainJob JSON")
    args = parser.parse_args(argv)
    try:
        job = TrainJob.read(args.job)
    except (OSError, ValueError, TypeError) as exc:
        print(f"runspec.trainer: cannot read the job {args.job}: {exc}", file=sys.stderr)
        return control.EXIT_BAD_JOB
    # The last line of "no second trainer, ever": whatever lost track of the first one, two
    # trainers never write one run folder. Held until this process exits.
    lock = FileLock(
        Path(job.control_dir) / control.TRAINER_LOCK_FILE, command=f"runspec.trainer {job.name}"
    )
    other = lock.try_acquire()
    if other is not None:
        print(
            f"runspec.trainer: {other} already trains run {job.name}; not starting a second",
            file=sys.stderr,
        )
        return control.EXIT_DUPLICATE
    put_up_walls(job)
    # Stamped like runspec.log's lines: `runspec logs` puts what comes between (LibreYOLO's
    # lines, a traceback) in time order with runspec's own.
    print(f"{utc_iso(SYSTEM.time())} runspec.trainer: starting (pid {os.getpid()})", flush=True)
    result = run(job, args.job)
    markers.report(Path(job.control_dir), result)
    why = result.detail or result.reason
    ended = f"{result.outcome.value} {why}".rstrip()
    print(f"{utc_iso(SYSTEM.time())} runspec.trainer: {ended}", flush=True)
    return result.exit_code if result.exit_code is not None else control.EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
