"""One run, one owner: whoever drives a run holds its lock, and every write of its record goes
through that owner.

The daemon and `runspec run` both take `<job>/owner.lock` before driving a run; a second
driver is refused at once, naming the first (pid, command) and what to do. Inside the owning
process the lifecycle, the supervisor and the pusher's thread change the record only through
`RunOwner`, one lock around every change and save; other processes send requests (a cancel
file) and never write the record.

A save can fail for want of space: the record then stays whole in memory, the run carries on
(nothing it does is lost: every step is re-entered after a restart), `disk_full` says which
path, and the next `flush` writes it once space is back.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from runspec.clock import SYSTEM, Clock, utc_iso
from runspec.errors import Cause, UsageError
from runspec.store.atomic import write_bytes
from runspec.store.entries import Fit
from runspec.store.finishrecord import FinishRecord
from runspec.store.hint import command
from runspec.store.locks import FileLock, Holder, holder
from runspec.store.paths import RunPaths, StateLayout
from runspec.store.record import RunCost
from runspec.store.room import free_bytes, is_no_space, is_unwritable, write_note
from runspec.store.state import (
    DiskFull,
    PushRecord,
    RecordStore,
    RunRecord,
    RunStatus,
    Terminal,
    Termination,
)
from runspec.voice import error

log = logging.getLogger("runspec.store.owner")


class OwnedElsewhere(UsageError):
    def __init__(self, name: str, by: Holder, state: Path) -> None:
        self.holder = by
        super().__init__(
            f"run {name!r} is already driven by {by}; wait for it to end, follow it with "
            f"`{command(f'status {name}', state)}`, or stop it with "
            f"`{command(f'cancel {name}', state)}`"
        )


class DaemonRunning(UsageError):
    pass


def run_holder(paths: RunPaths) -> Holder | None:
    """Who drives this run now (None: nobody)."""
    return holder(paths.owner_lock)


def daemon_holder(layout: StateLayout) -> Holder | None:
    """The daemon of this state folder, when one runs."""
    return holder(layout.daemon_lock)


def take_daemon_lock(layout: StateLayout) -> FileLock:
    lock = FileLock(layout.daemon_lock)
    found = lock.try_acquire()
    if found is not None:
        raise DaemonRunning(
            f"another runspec daemon ({found}) already uses the state folder {layout.state}; "
            "stop it first or pass a different --state"
        )
    # The daemon itself says its pid, once it holds the state folder: a `daemon --detach`
    # whose parent was killed before it could write the file still leaves a stop that works.
    try:
        write_bytes(layout.daemon_pid, f"{os.getpid()}\n".encode(), mode=0o644)
    except OSError as exc:
        log.warning("cannot write %s: %s", layout.daemon_pid, exc)
    return lock


def drop_daemon_pid(layout: StateLayout) -> None:
    """At the daemon's clean exit: a stale pid file could name another process later."""
    try:
        if layout.daemon_pid.read_text().strip() == str(os.getpid()):
            layout.daemon_pid.unlink()
    except (OSError, ValueError):
        pass


class RunLock:
    def __init__(self, paths: RunPaths) -> None:
        self.paths = paths
        self._lock = FileLock(paths.owner_lock)

    def acquire(self) -> None:
        """Take the run, or raise OwnedElsewhere naming its driver."""
        found = self._lock.try_acquire()
        if found is not None:
            raise OwnedElsewhere(self.paths.name, found, self.paths.state)

    def try_acquire(self) -> Holder | None:
        return self._lock.try_acquire()

    @property
    def held(self) -> bool:
        return self._lock.held

    def release(self) -> None:
        self._lock.release()


class RunOwner:
    """The one writer of a run's record in this process."""

    def __init__(self, store: RecordStore, record: RunRecord, clock: Clock = SYSTEM) -> None:
        self.store = store
        self.record = record
        self.clock = clock
        self.note = store.layout.run_paths(record.name).disk_note
        self._lock = threading.RLock()
        self._unsaved = False
        self._read_only: str | None = None  # the folder found read-only, said once
        # Told when a save fails for want of space, or works again (the run's progress line).
        self.on_disk_full: Callable[[str], None] = lambda line: None

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def status(self) -> RunStatus:
        return self.record.status

    def save(self) -> bool:
        """Persist the record; False (and kept in memory) when the disk is full."""
        with self._lock:
            try:
                self.store.save(self.record)
            except OSError as exc:
                self._unsaved_by(exc)
                return False
            if self._read_only is not None:
                self.on_disk_full(f"{self._read_only} is writable again: the record is saved")
                self._read_only = None
            if self._unsaved and self.record.disk_full is not None:
                self.on_disk_full("space is back: the record is saved again")
                self.record.disk_full = None
                write_note(self.note, None)
                self.store.save(self.record)
            self._unsaved = False
            return True

    def _unsaved_by(self, exc: OSError) -> None:
        """A save that failed for a reason waiting can mend: the record stays in memory (a
        full disk, a state folder made read-only); any other error is raised."""
        if is_no_space(exc):
            self._no_space(exc)
            return
        if not is_unwritable(exc):
            raise exc
        self._unsaved = True
        if self._read_only is None:
            self._read_only = str(self.store.path(self.name).parent)
            self.on_disk_full(
                error(
                    f"STATE FOLDER READ-ONLY: cannot save the run's record in {self._read_only} "
                    f"({exc.strerror}); the run goes on and saves it once it is writable again"
                )
            )

    def note_stuck(self, path: str, what: str, exc: BaseException) -> None:
        """A phase met a full disk or a read-only folder (`what`: while doing what)."""
        if is_no_space(exc):
            self.note_disk_full(path, "more than is free", f"no space left {what}")
        elif isinstance(exc, OSError):
            self._unsaved_by(exc)

    def _no_space(self, exc: OSError) -> None:
        path = self.store.path(self.name)
        if self.record.disk_full is None:
            free = free_bytes(str(path.parent))
            self.record.disk_full = DiskFull(
                str(path.parent),
                "a few kilobytes for the run's record",
                free,
                utc_iso(self.clock.time()),
            )
            write_note(self.note, self.record.disk_full.to_json())
            log.debug("%s: cannot save the record: %s", self.name, exc)
            self.on_disk_full(
                error(
                    f"DISK FULL: cannot save the run's record in {path.parent} "
                    f"({exc.strerror}); the run goes on and saves it once space is back"
                )
            )
        self._unsaved = True

    def note_disk_full(self, path: str, needed: int | str, what: str) -> None:
        """Another write (a staged checkpoint, the trainer's) failed for want of space."""
        with self._lock:
            first = self.record.disk_full is None or self.record.disk_full.path != path
            since = utc_iso(self.clock.time())
            self.record.disk_full = DiskFull(path, needed, free_bytes(path), since, what)
            write_note(self.note, self.record.disk_full.to_json())
            if first:
                self.on_disk_full(error(f"DISK FULL: {what}"))
            self.save()

    def clear_disk_full(self) -> None:
        with self._lock:
            if self.record.disk_full is not None:
                self.record.disk_full = None
                write_note(self.note, None)
                self.on_disk_full("space is back")
                self.save()

    def flush(self) -> None:
        """Retry a save that failed for want of space."""
        if self._unsaved:
            self.save()

    # One setter per thing that happens to a run: each names the fields it sets, typed.
    def epoch_ended(self, epoch: int, total_epochs: int) -> None:
        with self._lock:
            self.record.epoch, self.record.total_epochs = epoch, total_epochs
            self.save()

    def restarted(self) -> None:
        """One of train.restarts used."""
        with self._lock:
            self.record.restarts_used += 1
            self.save()

    def staged(self, data_yaml: Path) -> None:
        """The dataset is staged: a re-attached run resumes with it."""
        with self._lock:
            self.record.data_yaml = str(data_yaml)
            self.save()

    def costed(self, cost: RunCost) -> None:
        with self._lock:
            self.record.cost = RunCost.from_json(cost.to_json())  # kept as it is written
            self.save()

    def fitted(self, fit: Fit) -> None:
        """The schedule fitted to the budget (runspec.budgetfit): the epochs LibreYOLO plans."""
        with self._lock:
            self.record.fit, self.record.total_epochs = fit, fit.epochs
            self.save()

    def finish_noted(self, finish: FinishRecord) -> None:
        """How far the run's own finish got (runspec.machine.endgame writes it)."""
        with self._lock:
            self.record.finish = finish
            self.save()

    def transition(
        self,
        new: RunStatus,
        reason: str,
        termination: Termination | None = None,
        cause: Cause | None = None,
    ) -> None:
        """`cause`: a failure that was this machine's (runspec.errors.Cause)."""
        with self._lock:
            if cause is not None:
                self.record.cause = cause
            try:
                self.store.transition(self.record, new, reason, termination)
            except OSError as exc:
                self._unsaved_by(exc)

    def failed(self, reason: str, termination: Termination, source: object = None) -> None:
        """The run failed before its end: on to its final push. A failure no retry can mend
        (its `source` says it is `permanent`) is marked terminal in the record, which is
        pushed with it; one that was this machine's keeps its typed `cause` (a preflight's)."""
        permanent = bool(getattr(source, "permanent", False))
        cause = getattr(source, "cause", None)
        cause = cause if isinstance(cause, Cause) else None
        with self._lock:
            if permanent:
                self.record.terminal = Terminal(reason, utc_iso(self.clock.time()))
            self.transition(RunStatus.PUSHING, reason, termination, cause)

    def pushed(self, push: PushRecord) -> None:
        """The pusher's verified push."""
        with self._lock:
            self.record.last_push = push
            self.record.push_error = None
            self.save()

    def push_failed(self, message: str) -> None:
        with self._lock:
            self.record.push_error = message
            self.save()
