"""The watched inbox: inotify events (watchdog) plus scans, claim by move, reject with reasons.

Every file that appears ends in one of two places: the queue, whole, or `rejected/` with a
`.error` beside it. A file is handled once: it is claimed (moved into `<state>/claimed/`)
before anything acts on it. Only a regular file of its own is ever opened, never through a
link and never blocking; anything else (a FIFO, a device, a socket, a folder, a link, a hard
link to a file elsewhere, a file past the size limit) is rejected where it lies, saying what it
is. A spec is taken only once its writer is done, decided from what the daemon sees without
any capability (it cannot read other processes' open files in /proc): every write it saw was
followed by its writer's close (IN_CLOSE_WRITE) or the file was renamed in (IN_MOVED_TO), and
then nothing changed for `settle` seconds (the config's `inbox_settle`). A writer that pauses
without closing is waited for (up to `incomplete_wait`, then the file is rejected as
incomplete); a writer that closes and comes back within the settle time (`>` then `>>`) is
waited for again. A file found by a scan, with no event heard, is taken once it has not
changed for the settle time. Nothing here blocks or raises into the daemon's loop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import stat
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from runspec.clock import SYSTEM, Clock
from runspec.daemon.inboxfs import FolderProblem, Folders
from runspec.daemon.intake import AcceptFn, Intake, IntakeOutcome, line
from runspec.printable import printable
from runspec.spec.loader import check_spec_text
from runspec.spec.specread import not_regular
from runspec.spec.yamlload import MAX_BYTES, too_big
from runspec.store.paths import StateLayout, provenance_sidecar, rejected_dir

log = logging.getLogger("runspec.daemon.inbox")

SUFFIXES = (".yaml", ".yml")
STABLE_S = 0.2  # how often waiting files are looked at again
SETTLE_S = 2.0  # after its writer's close, this long unchanged before a spec is taken

# watchdog's event types, as the inbox reads them; opens and closes without writing are not.
_EVENTS = {"created": "created", "modified": "written", "closed": "closed", "deleted": "deleted"}

__all__ = ["AcceptFn", "Inbox", "IntakeOutcome", "is_candidate", "provenance_sidecar"]


def is_candidate(name: str) -> bool:
    return not name.startswith(".") and name.endswith(SUFFIXES)


@dataclass
class _Pending:
    first_seen: float
    changed_at: float
    writing: bool = False  # a write was seen that no close (or rename in) has ended yet
    closed: bool = False  # its writer closed it after writing, or it was renamed in
    heard: bool = False  # any event came for it (else only a scan found it)
    last_stat: tuple[int, int, int, int] | None = None


class _Handler(FileSystemEventHandler):
    def __init__(self, inbox: Path, events: queue.SimpleQueue[tuple[str, str]]) -> None:
        self.inbox = inbox
        self.events = events

    def _put(self, kind: str, raw: bytes | str) -> None:
        path = Path(os.fsdecode(raw))
        if path.parent == self.inbox:
            self.events.put((kind, path.name))

    def on_any_event(self, event: FileSystemEvent) -> None:
        # Folders count too: a folder named like a spec is rejected as what it is.
        if event.event_type == "moved":
            self._put("deleted", event.src_path)
            self._put("moved", event.dest_path)
        elif event.event_type in _EVENTS:
            self._put(_EVENTS[event.event_type], event.src_path)


class Inbox:
    def __init__(
        self,
        inbox: Path,
        state: Path,
        accept: AcceptFn,
        *,
        clock: Clock = SYSTEM,
        incomplete_wait: float = 60.0,
        settle: float = SETTLE_S,
        events: queue.SimpleQueue[tuple[str, str]] | None = None,
    ) -> None:
        self.inbox = inbox
        self.state = state
        self.claimed_dir = StateLayout(state).claimed
        self.rejected_dir = rejected_dir(inbox)
        self.accept = accept
        self.clock = clock
        self.incomplete_wait = incomplete_wait
        self.settle = settle
        # The main loop blocks on this queue, so a new file wakes it at once.
        self.events: queue.SimpleQueue[tuple[str, str]] = events or queue.SimpleQueue()
        self.pending: dict[str, _Pending] = {}
        self._observer: Any = None
        self.folders = Folders(inbox, state)
        self.intake = Intake(self.folders, inbox, state, accept, clock)
        self._retry_parked = False
        # Called between files (the daemon's watchdog ping): each file's work is bounded, a
        # burst of them is not.
        self.between: Callable[[], None] = lambda: None
        # Files whose handling failed even as a rejection: (name, inode), never retried.
        self._given_up: set[tuple[str, int]] = set()

    @property
    def problem(self) -> str | None:
        """Why the inbox cannot do all its work now (for the daemon's status), or None."""
        return printable("; ".join(self.folders.problems.values())) or None

    # -- watching --------------------------------------------------------------------------
    def start(self) -> None:
        self.inbox.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FolderProblem):  # made now; a problem shows in the status
            os.close(self.folders.claimed())
        observer = Observer()
        observer.schedule(_Handler(self.inbox, self.events), str(self.inbox), recursive=False)
        observer.daemon = True
        observer.start()
        self._observer = observer
        # The validator compiles its schema on first use; do it now, not on the first spec.

        check_spec_text(b"runspec: 1\n", "warm-up.yaml")
        # Scan after the observer started, so a file arriving in between is not missed.
        self.recover_claimed()
        self.scan()

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
        self.folders.close()

    def scan(self) -> None:
        """Pick up files that arrived unseen (before start, or an inotify overflow), and retry
        rejections held back while rejected/ was not usable."""
        self._retry_parked = bool(self.intake.parked)
        try:
            with os.scandir(self.folders.inbox) as it:
                found = [
                    (e.stat(follow_symlinks=False), e.name) for e in it if is_candidate(e.name)
                ]
        except OSError as exc:
            log.warning("cannot scan the inbox %s: %s", self.inbox, exc)
            return
        # First come, first served: a directory lists its files in no useful order (ext4 by
        # hash), so files found by a scan queue in the order they were written.
        for st, name in sorted(found, key=lambda e: (e[0].st_mtime_ns, e[1])):
            if (name, st.st_ino) not in self._given_up:
                self._pending(name)

    def note(self, kind: str, name: str) -> None:
        if kind == "deleted":
            self.pending.pop(name, None)
        elif is_candidate(name):
            item = self._pending(name)
            item.heard = True
            item.changed_at = self.clock.monotonic()  # every event restarts the settle time
            if kind == "written":
                item.writing = True
            elif kind in ("closed", "moved"):
                item.writing, item.closed = False, True

    def _pending(self, name: str) -> _Pending:
        item = self.pending.get(name)
        if item is None:
            now = self.clock.monotonic()
            item = self.pending[name] = _Pending(first_seen=now, changed_at=now)
        return item

    def drain_events(self) -> None:
        while True:
            try:
                kind, name = self.events.get_nowait()
            except queue.Empty:
                return
            self.note(kind, name)

    def next_check_in(self) -> float | None:
        """How soon a waiting file needs another look (None: nothing waits)."""
        if not self.pending and not self._retry_parked:
            return None
        return STABLE_S

    def recover_claimed(self) -> list[IntakeOutcome]:
        """Files claimed by a daemon that died before deciding on them are decided now."""
        return self.intake.recover()

    # -- deciding --------------------------------------------------------------------------
    def process(self) -> list[IntakeOutcome]:
        self.drain_events()
        outcomes: list[IntakeOutcome] = []
        if self._retry_parked:
            self._retry_parked = False
            outcomes += self.intake.retry_parked()
        now = self.clock.monotonic()
        ready: list[str] = []
        for name in list(self.pending):
            outcomes += self._guarded(name, partial(self._look, name, now, ready))
        for name in ready:
            self.between()
            del self.pending[name]
            outcomes += self._guarded(name, partial(self.intake.claim_and_decide, name, None))
        return outcomes

    def _guarded(self, name: str, step: Callable[[], list[IntakeOutcome]]) -> list[IntakeOutcome]:
        """One file's step. A file that raises is rejected with the reason, or given up on
        (logged once, never retried): no file makes the inbox loop on a traceback."""
        try:
            return step()
        except Exception as exc:
            log.exception("inbox: unexpected error handling %s", name)
            self.pending.pop(name, None)
            why = f"runspec could not handle this file ({type(exc).__name__}: {exc}); see its log"
            try:
                return self.intake.reject_here(name, [line(printable(name), why)])
            except Exception:
                log.exception("inbox: cannot reject %s either; leaving it be", name)
                with contextlib.suppress(OSError):
                    st = os.stat(name, dir_fd=self.folders.inbox, follow_symlinks=False)
                    self._given_up.add((name, st.st_ino))
                return []

    def _look(self, name: str, now: float, ready: list[str]) -> list[IntakeOutcome]:
        """Reject at once what can never be a spec; add `name` to `ready` once its writer is
        done; claim it as incomplete when it has changed for longer than anyone is waited for."""
        item = self.pending[name]
        try:
            st = os.stat(name, dir_fd=self.folders.inbox, follow_symlinks=False)
        except FileNotFoundError:
            del self.pending[name]
            return []
        refuse = None
        if not stat.S_ISREG(st.st_mode):
            refuse = not_regular(name, st.st_mode, self.folders.inbox)
        elif st.st_nlink > 1:
            refuse = (
                f"a hard link (the file has {st.st_nlink} names), not a file of its own: "
                "copy the spec in instead"
            )
        elif st.st_size > MAX_BYTES:  # not read at all
            refuse = too_big(st.st_size, name).message
        if refuse is not None:
            del self.pending[name]
            return self.intake.reject_here(name, [line(printable(name), refuse)])
        key = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if item.last_stat is not None and key != item.last_stat:
            item.changed_at = now  # changed with no event heard (an overflow, a lost event)
        item.last_stat = key
        if self._settled(item, now, st):
            ready.append(name)
        elif now - item.first_seen >= self.incomplete_wait:
            del self.pending[name]
            why = "still being written" if item.writing else "still changing"
            waited = f"{why} {now - item.first_seen:.0f}s after it appeared"
            return self.intake.claim_and_decide(name, waited)
        return []

    def _settled(self, item: _Pending, now: float, st: os.stat_result) -> bool:
        """Whether the writer is done: no write left unclosed, something written (an empty
        file is a writer that has only just opened it, unless it closed it so), and nothing
        changed for the settle time. A file only a scan has seen may have been written long
        before: its own times count then."""
        if item.writing or (st.st_size == 0 and not item.closed):
            return False
        if now - item.changed_at >= self.settle:
            return True
        touched = max(st.st_mtime_ns, st.st_ctime_ns) / 1e9
        return not item.heard and self.clock.time() - touched >= self.settle
