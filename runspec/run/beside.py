"""`runspec run` beside a daemon on the same state folder: one trainer per machine.

With runspecd training one run and another queued, a `runspec run` of the queued spec trained
it at the same time: two trainers on one GPU (an OOM, or both at half speed), and the daemon
then found the run's lock taken. The daemon owns the machine while it drives a run, and owns
every run it has queued; a foreground run is refused with the command that queues it instead.
"""

from __future__ import annotations

from pathlib import Path
from shlex import quote

from runspec.spec.model import Spec
from runspec.store.hint import command
from runspec.store.owner import DaemonRunning, daemon_holder, run_holder
from runspec.store.paths import StateLayout
from runspec.store.state import DamagedRecord, RecordStore, RunStatus


def refuse_beside_daemon(spec: Spec, state: Path, spec_file: Path, *, resume: bool = False) -> None:
    """Raise DaemonRunning when a daemon of `state` holds this spec's run unfinished, or
    drives any run now. The submit it suggests keeps the `--resume` that was asked for."""
    layout = StateLayout(state)
    daemon = daemon_holder(layout)
    if daemon is None:
        return
    store = RecordStore(state)
    why = ""
    try:
        own = store.load(spec.name)
    except DamagedRecord:
        own = None
    if own is not None and own.status is not RunStatus.FINISHED:
        why = f" and has run {spec.name!r} {own.status.value}"
    else:
        for record in store.all():
            if record.status is RunStatus.FINISHED:
                continue
            driver = run_holder(layout.run_paths(record.name))
            if driver is not None and driver.pid == daemon.pid:
                why = f" and is training {record.name!r}"
                break
    if why:
        again = " --resume" if resume else ""
        raise DaemonRunning(
            f"runspecd (pid {daemon.pid}) drives this machine{why}: "
            f"`{command(f'submit {quote(str(spec_file))}{again}', layout.state)}` queues this "
            "spec behind it "
            f"(`{command('status', layout.state)}` shows "
            "the queue)"
        )
