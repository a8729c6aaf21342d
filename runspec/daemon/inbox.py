"""The watched inbox: inotify events (watchdog) plus scans, claim by rename, reject with reasons.

A file is handled once: it is claimed by renaming it into `<state>/claimed/` before anything
acts on it. A file still being written in place is waited for (up to `incomplete_wait`): it is
complete once its writer closed it, once it was renamed into the inbox, or once it validates and
has stopped changing. Nothing here blocks or raises into the daemon's loop: every problem with a
file ends as a rejection beside it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import queue
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watchdog.events import (
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from runspec.clock import SYSTEM, Clock, utc_iso
from runspec.errors import RunspecError, SpecInvalid
from runspec.model import Spec
from runspec.state import RunRecord

log = logging.getLogger("runspec.daemon.inbox")

SUFFIXES = (".yaml", ".yml")
STABLE_S = 0.2  # a valid file unchanged this long (no close seen) counts as written
SETTLED_S = 1.0  # a valid file last modified this long ago counts as written

AcceptFn = Callable[[Spec, Path, dict[str, Any] | None, Clock], RunRecord]


def is_candidate(name: str) -> bool:
    return not name.startswith(".") and name.endswith(SUFFIXES)


def provenance_sidecar(inbox: Path, name: str) -> Path:
    """Where `runspec submit` leaves a spec's provenance (a dotfile, so the inbox ignores it)."""
    return inbox / f".{name}.provenance.json"


@dataclass
class _Pending:
    first_seen: float
    complete: bool = False  # closed by its writer, or renamed in
    dirty: bool = True  # something happened since the last look
    last_stat: tuple[int, int] | None = None
    last_look: float = 0.0
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    file: str
    accepted: str | None = None  # the run's name
    rejected: Path | None = None  # where the file went
    reason: str = ""


def _move_out(src: Path, dest: Path) -> None:
    """Link, then unlink, rather than rename: a rename out of a watched folder is an
    IN_MOVED_FROM that watchdog holds back half a second (waiting for its pair), and every
    later inbox event with it. The state lock makes this daemon the only one moving files."""
    try:
        os.link(src, dest)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM):  # another filesystem, or no hard links
            raise
        shutil.copy2(src, dest)
    os.unlink(src)


class _Handler(FileSystemEventHandler):
    def __init__(self, inbox: Path, events: queue.SimpleQueue[tuple[str, str]]) -> None:
        self.inbox = inbox
        self.events = events

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory:
            return
        if isinstance(event, FileMovedEvent):
            dest = Path(os.fsdecode(event.dest_path))
            if dest.parent == self.inbox:
                self.events.put(("moved", dest.name))
            return
        src = Path(os.fsdecode(event.src_path))
        if src.parent != self.inbox:
            return
        if isinstance(event, FileClosedEvent):
            self.events.put(("closed", src.name))
        elif isinstance(event, FileCreatedEvent | FileModifiedEvent):
            self.events.put(("changed", src.name))
        elif isinstance(event, FileDeletedEvent):
            self.events.put(("deleted", src.name))


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
        self._seq = 0

    # -- watching --------------------------------------------------------------------------
    def start(self) -> None:
        self.inbox.mkdir(parents=True, exist_ok=True)
        self.claimed_dir.mkdir(parents=True, exist_ok=True)
        observer = Observer()
        observer.schedule(_Handler(self.inbox, self.events), str(self.inbox), recursive=False)
        observer.daemon = True
        observer.start()
        self._observer = observer
        # The validator compiles its schema on first use; do it now, not on the first spec.
        self._problems_of_text(b"runspec: 1\n", "warm-up.yaml")
        # Scan after the observer started, so a file arriving in between is not missed.
        self.recover_claimed()
        self.scan()

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None

    def scan(self) -> None:
        """Pick up files that arrived unseen (before start, or an inotify overflow)."""
        try:
            entries = [
                (entry.stat(follow_symlinks=False).st_mtime_ns, entry.name)
                for entry in os.scandir(self.inbox)
                if entry.is_file(follow_symlinks=False) and is_candidate(entry.name)
            ]
        except OSError as exc:
            log.warning("cannot scan the inbox %s: %s", self.inbox, exc)
            return
        # First come, first served: a directory lists its files in no useful order (ext4 by
        # hash), so files found by a scan queue in the order they were written.
        for _, name in sorted(entries):
            self._touch(name, complete=False)

    def note(self, kind: str, name: str) -> None:
        if kind == "deleted":
            self.pending.pop(name, None)
        elif is_candidate(name):
            self._touch(name, complete=kind in ("closed", "moved"), reopened=kind == "changed")

    def _touch(self, name: str, complete: bool, reopened: bool = False) -> None:
        item = self.pending.get(name)
        if item is None:
            item = self.pending[name] = _Pending(first_seen=self.clock.monotonic())
        if complete:
            item.complete = True
        elif reopened:
            item.complete = False
        item.dirty = True

    def drain_events(self) -> None:
        while True:
            try:
                kind, name = self.events.get_nowait()
            except queue.Empty:
                return
            self.note(kind, name)

    def next_check_in(self) -> float | None:
        """How soon a waiting file needs another look (None: nothing waits)."""
        if not self.pending:
            return None
        return STABLE_S

    # -- deciding --------------------------------------------------------------------------
    def process(self) -> list[Outcome]:
        self.drain_events()
        outcomes: list[Outcome] = []
        for name in list(self.pending):
            try:
                outcome = self._look(name)
            except Exception:  # one odd file must never stall the inbox
                log.exception("inbox: unexpected error handling %s", name)
                self.pending.pop(name, None)
                continue
            if outcome is not None:
                outcomes.append(outcome)
        return outcomes

    def _look(self, name: str) -> Outcome | None:
        item = self.pending[name]
        path = self.inbox / name
        try:
            st = path.stat()
        except FileNotFoundError:
            del self.pending[name]
            return None
        now = self.clock.monotonic()
        stat_key = (st.st_size, st.st_mtime_ns)
        age = self.clock.time() - st.st_mtime
        if item.last_stat is None and age >= self.incomplete_wait:
            # Untouched for longer than any writer is waited for when first seen: written long
            # ago (found by a scan), so it is as complete as it will ever be.
            item.complete = True
        if item.complete:
            del self.pending[name]
            return self._claim_and_handle(name, incomplete=False)
        changed = stat_key != item.last_stat
        if item.dirty or changed:
            item.problems = self._problems_of(path)
        stable = not changed and now - item.last_look >= STABLE_S
        item.dirty = False
        item.last_stat = stat_key
        item.last_look = now
        if not item.problems and (stable or age >= SETTLED_S):
            del self.pending[name]
            return self._claim_and_handle(name, incomplete=False)
        if now - item.first_seen >= self.incomplete_wait:
            del self.pending[name]
            return self._claim_and_handle(name, incomplete=True)
        return None

    def _problems_of(self, path: Path) -> list[str]:
        try:
            data = path.read_bytes()
        except OSError as exc:
            return [f"{path.name}:1:1: : {exc}"]
        return self._problems_of_text(data, path.name)

    def _problems_of_text(self, data: bytes, name: str) -> list[str]:
        try:
            self._load(data, name)
        except SpecInvalid as exc:
            return [str(p) for p in exc.problems]
        except RunspecError as exc:
            return [f"{name}:1:1: : {exc}"]
        return []

    @staticmethod
    def _load(data: bytes, source: str) -> Spec:
        from runspec.loader import load_spec_text

        return load_spec_text(data, source)

    def _claim(self, name: str) -> Path | None:
        self._seq += 1
        stamp = utc_iso(self.clock.time()).replace(":", "").replace("+0000", "Z")
        dest = self.claimed_dir / f"{stamp}-{os.getpid()}-{self._seq:06d}-{name}"
        try:
            _move_out(self.inbox / name, dest)
        except FileNotFoundError:
            return None  # gone meanwhile
        sidecar = provenance_sidecar(self.inbox, name)
        with contextlib.suppress(FileNotFoundError):
            _move_out(sidecar, dest.with_name(dest.name + ".provenance.json"))
        return dest

    def recover_claimed(self) -> list[Outcome]:
        """Files claimed by a daemon that died before deciding on them are decided now."""
        outcomes = []
        for path in sorted(self.claimed_dir.glob("*")):
            if path.name.endswith(".provenance.json") or not path.is_file():
                continue
            original = path.name.split("-", 3)[-1]
            try:
                outcomes.append(self._handle(path, original, incomplete=False))
            except Exception:  # a full disk, say: keep the file for the next start, never loop
                log.exception("inbox: cannot decide on claimed %s yet", path.name)
        return outcomes

    def _claim_and_handle(self, name: str, incomplete: bool) -> Outcome | None:
        claimed = self._claim(name)
        if claimed is None:
            return None
        return self._handle(claimed, name, incomplete)

    def _handle(self, claimed: Path, name: str, incomplete: bool) -> Outcome:
        sidecar = claimed.with_name(claimed.name + ".provenance.json")
        try:
            data = claimed.read_bytes()
            spec = self._load(data, name)
        except SpecInvalid as exc:
            lines = [str(p) for p in exc.problems]
            if incomplete:
                lines.insert(
                    0,
                    f"{name}:1:1: : incomplete: still not a valid spec "
                    f"{self.incomplete_wait:.0f}s after it appeared (was it still being written?)",
                )
            return self._reject(claimed, name, lines)
        except (OSError, RunspecError) as exc:
            return self._reject(claimed, name, [f"{name}:1:1: : {exc}"])
        provenance: dict[str, Any] = {"inbox_file": name, "claimed_at": utc_iso(self.clock.time())}
        try:
            provenance.update(json.loads(sidecar.read_text()))
        except FileNotFoundError:
            provenance.setdefault("via", "inbox")
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable provenance for %s: %s", name, exc)
        try:
            record = self.accept(spec, self.state, provenance, self.clock)
        except RunspecError as exc:
            return self._reject(claimed, name, [f"{name}:1:1: /name: {exc}"])
        claimed.unlink(missing_ok=True)
        sidecar.unlink(missing_ok=True)
        log.info("inbox: accepted %s as run %s (queued)", name, record.name)
        return Outcome(file=name, accepted=record.name)

    def _reject(self, claimed: Path, name: str, lines: list[str]) -> Outcome:
        self.rejected_dir.mkdir(exist_ok=True)
        dest = self.rejected_dir / name
        n = 1
        while dest.exists() or dest.with_name(dest.name + ".error").exists():
            stem, dot, suffix = name.rpartition(".")
            dest = self.rejected_dir / f"{stem}.{n}{dot}{suffix}"
            n += 1
        error = dest.with_name(dest.name + ".error")
        tmp = error.with_name(f".{error.name}.tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, error)
        shutil.move(claimed, dest)
        claimed.with_name(claimed.name + ".provenance.json").unlink(missing_ok=True)
        log.warning("inbox: rejected %s -> %s: %s", name, dest, lines[0] if lines else "")
        return Outcome(file=name, rejected=dest, reason="\n".join(lines))
