"""The watched inbox: inotify events (watchdog) plus scans, claim by move, reject with reasons.

Every file that appears ends in one of two places: the queue, whole, or `rejected/` with a
`.error` beside it. A file is handled once: it is claimed (moved into `<state>/claimed/`)
before anything acts on it. Only a regular file of its own is ever opened, never through a
link and never blocking; anything else (a FIFO, a device, a socket, a folder, a link, a hard
link to a file elsewhere, a file past the size limit) is rejected where it lies, saying what it
is. A spec is taken only once its writer is done: it was renamed in (IN_MOVED_TO) or closed
after writing (IN_CLOSE_WRITE), or, found by a scan, it has been quiet for a while; and in
every case no process still holds it open for writing. Nothing here blocks or raises into the
daemon's loop.
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
from runspec.daemon import writers
from runspec.daemon.inboxfs import FolderProblem, Folders
from runspec.daemon.intake import AcceptFn, Intake, Outcome, line
from runspec.paths import provenance_sidecar
from runspec.printable import printable
from runspec.specread import not_regular
from runspec.yamlload import MAX_BYTES, too_big

log = logging.getLogger("runspec.daemon.inbox")

SUFFIXES = (".yaml", ".yml")
STABLE_S = 0.2  # how often waiting files are looked at again
QUIET_S = 1.0  # a file found by a scan, unchanged this long (and held by no writer), is done

# watchdog's event types, as the inbox reads them; opens and closes without writing are not.
_EVENTS = {"created": "changed", "modified": "changed", "closed": "closed", "deleted": "deleted"}

__all__ = ["AcceptFn", "Inbox", "Outcome", "is_candidate", "provenance_sidecar"]


def is_candidate(name: str) -> bool:
    return not name.startswith(".") and name.endswith(SUFFIXES)


@dataclass
class _Pending:
    first_seen: float
    changed_at: float
    done: bool = False  # its writer said so: closed after writing, or renamed in
    last_stat: tuple[int, int, int] | None = None


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
        events: queue.SimpleQueue[tuple[str, str]] | None = None,
    ) -> None:
        self.inbox = inbox
        self.state = state
        self.claimed_dir = state / "claimed"
        self.rejected_dir = inbox / "rejected"
        self.accept = accept
        self.clock = clock
        self.incomplete_wait = incomplete_wait
        # The main loop blocks on this queue, so a new file wakes it at once.
        self.events: queue.SimpleQueue[tuple[str, str]] = events or queue.SimpleQueue()
        self.pending: dict[str, _Pending] = {}
        self._observer: Any = None
        self.folders = Folders(inbox, state)
        self.intake = Intake(self.folders, inbox, state, accept, clock)
        self._retry_parked = False
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
        from runspec.loader import check_spec_text

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
                self._touch(name, done=False)

    def note(self, kind: str, name: str) -> None:
        if kind == "deleted":
            self.pending.pop(name, None)
        elif is_candidate(name):
            self._touch(name, done=kind in ("closed", "moved"), reopened=kind == "changed")

    def _touch(self, name: str, done: bool, reopened: bool = False) -> None:
        item = self.pending.get(name)
        if item is None:
            now = self.clock.monotonic()
            item = self.pending[name] = _Pending(first_seen=now, changed_at=now)
        if done:
            item.done = True
        elif reopened:
            item.done = False

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

    def recover_claimed(self) -> list[Outcome]:
        """Files claimed by a daemon that died before deciding on them are decided now."""
        return self.intake.recover()

    # -- deciding --------------------------------------------------------------------------
    def process(self) -> list[Outcome]:
        self.drain_events()
        outcomes: list[Outcome] = []
        if self._retry_parked:
            self._retry_parked = False
            outcomes += self.intake.retry_parked()
        now = self.clock.monotonic()
        ready: list[str] = []
        for name in list(self.pending):
            outcomes += self._guarded(name, partial(self._look, name, now, ready))
        held = self._writers(ready)
        for name in ready:
            waited = now - self.pending[name].first_seen
            pid = held.get(name)
            if pid is not None and waited < self.incomplete_wait:
                continue  # its writer is still at it
            del self.pending[name]
            note = None
            if pid is not None:
                holder = writers.describe(pid)
                note = f"still held open for writing by {holder} {waited:.0f}s after it appeared"
            outcomes += self._guarded(name, partial(self.intake.claim_and_decide, name, note))
        return outcomes

    def _guarded(self, name: str, step: Callable[[], list[Outcome]]) -> list[Outcome]:
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

    def _look(self, name: str, now: float, ready: list[str]) -> list[Outcome]:
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
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if key != item.last_stat:
            item.last_stat, item.changed_at = key, now
        quiet = now - item.changed_at >= QUIET_S or self.clock.time() - st.st_mtime >= QUIET_S
        if item.done or quiet:
            ready.append(name)
        elif now - item.first_seen >= self.incomplete_wait:
            del self.pending[name]
            waited = f"still changing {now - item.first_seen:.0f}s after it appeared"
            return self.intake.claim_and_decide(name, waited)
        return []

    def _writers(self, names: list[str]) -> dict[str, int]:
        """Which of `names` another process holds open for writing, and its pid."""
        if not names:
            return {}
        base = os.fsencode(os.path.realpath(self.inbox))
        paths = {base + b"/" + os.fsencode(name): name for name in names}
        return {paths[p]: pid for p, pid in writers.held_for_writing(paths).items()}
