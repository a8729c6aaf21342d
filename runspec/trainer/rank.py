"""One rank of a run across nodes: `torchrun ... -m runspec.trainer.rank --job JOB_JSON`.

Started by the trainer (runspec.trainer.multinode) on every node. It trains as the trainer
does on one box (the same model, options and callback); LibreYOLO runs the callback on rank 0
only, which is on node 0, next to the runspec that owns the run's control folder. Its error,
if any, goes to `rank-N.error` for the trainer to say why.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from runspec.budget import eval_interval_from_args
from runspec.trainer.control import TrainJob
from runspec.trainer.heavyimports import heavy_imports
from runspec.trainer.multinode import announce_stop, listen_for_stop, write_rank_error
from runspec.trainer.peerwatch import PeerWatch

with heavy_imports():  # torch, torchvision and LibreYOLO
    from runspec.trainer.child import StopControl, TrainingStopped, train_kwargs
    from runspec.trainer.modelbuild import build_model, resolve_device


class NodeStopControl(StopControl):
    """The callback, which also tells the other nodes' ranks that a stop is on purpose."""

    def on_train_epoch_end(self, event: Any) -> None:
        try:
            super().on_train_epoch_end(event)
        except TrainingStopped as exc:
            announce_stop(str(exc))
            raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runspec.trainer.rank")
    parser.add_argument("--job", type=Path, required=True)
    job = TrainJob.read(parser.parse_args(argv).job)
    os.environ.update(job.env)
    ctl = Path(job.control_dir)
    listen_for_stop(ctl)
    peers = PeerWatch(ctl)  # a hung peer ends this rank within RUNSPEC_PEER_SILENCE
    peers.start()
    try:
        device = resolve_device(job.device)
        model = build_model(job, device, job.args.get("pretrained", True))
        callback = NodeStopControl(job.control_dir, eval_interval_from_args(job.args))
        kwargs = train_kwargs(job, device, callback)
        if device == "cpu":
            kwargs["sync_bn"] = False  # SyncBatchNorm works with GPU modules only
        model.train(**kwargs)
        peers.done()
    except BaseException as exc:
        write_rank_error(ctl, exc)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
