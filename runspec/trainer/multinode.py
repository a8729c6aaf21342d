"""Training across nodes: the trainer runs torchrun, torchrun runs one rank program per GPU.

`runspec run` on every node sets RUNSPEC_TORCHRUN to torchrun's node options
(runspec.engines.nodes); the trainer then starts `torchrun <options> -m runspec.trainer.rank`
instead of training itself, copies its output into the console log and, when it fails, says
why in one line: a rank's own error (`rank-N.error`, written by the rank program) or torchrun's
last words. torchrun's static rendezvous waits `RUNSPEC_RENDEZVOUS_TIMEOUT` seconds (600 by
default) for the other nodes, then fails: node 0 alone never trains the run by itself.

The stop that rank 0 (on node 0) decides at an epoch boundary ends its process, and every
other rank then sees only a dead peer. So before it ends, rank 0 sets `runspec/stopped` in the
rendezvous store (torchrun's TCPStore, hosted by node 0's torchrun) and waits a few seconds for
each other rank to acknowledge; each of those writes `peer-stopped` in its own node's control
folder, and that file is how the trainer on the other nodes tells a stop from a failure.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from runspec.errors import Cause
from runspec.trainer.faults import cause_of_line
from runspec.units import plain_int

NODES_ENV = "RUNSPEC_TORCHRUN"  # torchrun's node options, space separated
RDZV_ID_ENV = "RUNSPEC_RDZV_ID"  # the run's rendezvous id (runspec.engines.nodes), if any
RENDEZVOUS_ENV = "RUNSPEC_RENDEZVOUS_TIMEOUT"
DEFAULT_RENDEZVOUS = 600
STOP_KEY = "runspec/stopped"
ACK_KEY = "runspec/stop-acks"
PEER_STOPPED = "peer-stopped"
ACK_WAIT = 8.0  # seconds rank 0 waits for the others to hear its stop
_ERROR_LINE = re.compile(r"([A-Za-z_][\w.]*(?:Error|Exception|Timeout)): ?(.*)$")


class TorchrunFailed(RuntimeError):
    """torchrun exited non-zero; the message says why in a person's words, `cause` whether
    it was this machine's (runspec.trainer.faults)."""

    def __init__(self, why: str, cause: Cause | None) -> None:
        super().__init__(why)
        self.cause = cause


def rendezvous_timeout() -> int:
    raw = os.environ.get(RENDEZVOUS_ENV, "").strip()
    return plain_int(raw) or DEFAULT_RENDEZVOUS  # unset, 0 or not a number: the default


def _rank_error_file(control_dir: Path, rank: int) -> Path:
    return control_dir / f"rank-{rank}.error"


def write_rank_error(control_dir: Path, exc: BaseException) -> None:
    rank = int(os.environ.get("RANK", "0"))
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    with contextlib.suppress(OSError):  # the traceback is in the console log anyway
        _rank_error_file(control_dir, rank).write_text(text + "\n")


def _why(
    control_dir: Path, code: int, tail: collections.deque[str], timeout: int
) -> tuple[str, Cause | None]:
    """Why torchrun failed, in one line, and its cause: a rank's own error line (written by
    `write_rank_error`, its type first), else torchrun's last words."""
    errors = sorted(control_dir.glob("rank-*.error"))
    if errors:
        rank = errors[0].stem.removeprefix("rank-")
        line = errors[0].read_text().strip()
        kind, _, message = line.partition(": ")
        return f"rank {rank}: {line}", cause_of_line(kind, message)
    words = " ".join(tail)
    if "waiting for clients" in words or "DistStoreError" in words:
        why = (
            f"rendezvous timed out: the other nodes did not join within {timeout} s "
            f"({RENDEZVOUS_ENV}); node 0 does not train the run alone"
        )
        return why, Cause.LINK  # the other nodes never came: a fresh set may
    for line in reversed(tail):
        match = _ERROR_LINE.search(line)
        if match:
            kind = match.group(1).rsplit(".", 1)[-1]
            return f"torchrun: {kind}: {match.group(2)}", cause_of_line(kind, match.group(2))
    return f"torchrun exited {code}", None


def torchrun_train(job_file: Path, control_dir: Path, options: str) -> None:
    """Train through torchrun; raises TorchrunFailed unless every rank finished."""
    for stale in [*control_dir.glob("rank-*.error"), control_dir / PEER_STOPPED]:
        stale.unlink(missing_ok=True)
    timeout = rendezvous_timeout()
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *options.split(),
        "--max_restarts=0",  # a retry is the engine's (a fresh machine), never torchrun's
        f"--rdzv_conf=timeout={timeout}",
        "-m",
        "runspec.trainer.rank",
        "--job",
        str(job_file),
    ]
    print(f"runspec.trainer: torchrun {options}", flush=True)
    tail: collections.deque[str] = collections.deque(maxlen=60)
    # The run's rendezvous id (runspec.engines.nodes.rendezvous_id) goes to torchrun through
    # its environment (torchrun reads PET_<OPTION>): never on a command line `ps` shows.
    env = {k: v for k, v in os.environ.items() if k != RDZV_ID_ENV}
    if rdzv := os.environ.get(RDZV_ID_ENV, "").strip():
        env["PET_RDZV_ID"] = rdzv
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
    )
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.decode("utf-8", "replace")
        sys.stdout.write(line)
        sys.stdout.flush()
        tail.append(line.strip())
    code = proc.wait()
    if code != 0:
        raise TorchrunFailed(*_why(control_dir, code, tail, timeout))


def peer_stopped(control_dir: Path) -> str | None:
    try:
        return (control_dir / PEER_STOPPED).read_text().strip() or "stopped"
    except OSError:
        return None


def run_store(timeout: float) -> Any:
    """Node 0's TCPStore as a rank reaches it, its keys under the run's rendezvous id
    (TORCHELASTIC_RUN_ID, which torchrun gives every rank): the keys torchrun's own rendezvous
    uses are there too, and a stranger that connects without the id reaches none of them."""
    from torch.distributed import PrefixStore, TCPStore  # noqa: PLC0415 - torch, in the rank

    store = TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        is_master=False,
        timeout=timedelta(seconds=timeout),
    )
    return PrefixStore(os.environ.get("TORCHELASTIC_RUN_ID", "none"), store)


def announce_stop(reason: str) -> None:
    """Rank 0: tell every other rank the run stops on purpose, before its process ends."""
    others = int(os.environ.get("WORLD_SIZE", "1")) - int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if others <= 0:
        return
    try:
        store = run_store(ACK_WAIT)
        store.set(STOP_KEY, reason)
        end = time.monotonic() + ACK_WAIT
        while store.add(ACK_KEY, 0) < others and time.monotonic() < end:
            time.sleep(0.1)
    except Exception as exc:  # the others then see a failure: said, never fatal to the stop
        print(f"runspec.trainer: could not tell the other nodes of the stop: {exc}", flush=True)


def listen_for_stop(control_dir: Path) -> None:
    """A rank off node 0: note rank 0's stop in this node's control folder when it comes."""
    if int(os.environ.get("GROUP_RANK", "0")) == 0:
        return

    def listen() -> None:
        try:
            store = run_store(timedelta(days=30).total_seconds())
            store.wait([STOP_KEY])
            reason = store.get(STOP_KEY).decode("utf-8", "replace")
            (control_dir / PEER_STOPPED).write_text(reason + "\n")
            store.add(ACK_KEY, 1)
        except Exception:
            return  # the store went away: node 0 died, and that is a failure

    threading.Thread(target=listen, name="runspec-stop-listener", daemon=True).start()
