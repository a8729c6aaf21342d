"""What a watcher remembers of each repo between passes: since when its reads fail, and the
longest failing time owed to the box until the box commits again (runspec.watch.liveness).

A watcher left running keeps it in memory; `runspec watch` also keeps it in a small file of its
state folder (`watch-memory.json`), so a watcher run `--once` every 10 minutes (an HF
scheduled job with a persistent HOME, a cron) remembers an outage across its passes too. The
file is read capped and strictly: anything odd in it is forgotten, never trusted. Times are the
watcher's wall clock, which runspec.watch.liveness holds to the Hub's.

Two watchers on one machine share the file (the default state folder): each save is a merge,
read and written under a lock beside the file, in which a watcher writes only the repos it
learned something of since its last save, so neither's outage is written over by the other's.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runspec.store.atomic import write_json_atomic

log = logging.getLogger("runspec.watch")

MAX_BYTES = 256 * 1024
MAX_REPOS = 1000
_SHA = re.compile(r"[0-9a-f]{40}")


class Memory:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.failing_since: dict[str, float] = {}
        self.owed: dict[str, tuple[float, str | None]] = {}  # repo: (seconds, box commit)
        self.path: Path | None = None
        self._learned: set[str] = set()  # the repos whose entries this watcher has to save

    def failed(self, repo: str, now: float) -> None:
        with self._lock:
            if repo not in self.failing_since:
                self.failing_since[repo] = now
                self._learned.add(repo)
                self._save()

    def cleared(self, repo: str, now: float, box_commit: str | None) -> float:
        """The failing time owed for `repo` after a clean read at `now`."""
        with self._lock:
            began = self.failing_since.pop(repo, None)
            owed, against = self.owed.get(repo, (0.0, box_commit))
            if against != box_commit:  # the box committed since: it met the Hub again
                owed = 0.0
            if began is not None:  # the longest outage, not the sum of every short one
                owed = max(owed, now - began)
            if owed > 0:
                self.owed[repo] = (owed, box_commit)
            else:
                self.owed.pop(repo, None)
            if began is not None or owed > 0:
                self._learned.add(repo)
                self._save()
            return owed

    def keep_in(self, path: Path) -> None:
        """Remember through `path` from now on, starting from what it holds."""
        with self._lock:
            self.path = path
            self.failing_since, self.owed = _read(path)

    def _save(self) -> None:
        """This watcher's news merged into the file: the repos it learned of since its last
        save take its entries (or lose theirs), every other repo keeps what the file says."""
        if self.path is None or not self._learned:
            return
        try:
            with _locked(self.path):
                failing, owed = _read(self.path)
                for repo in self._learned:
                    failing.pop(repo, None)
                    owed.pop(repo, None)
                    if repo in self.failing_since:
                        failing[repo] = self.failing_since[repo]
                    if repo in self.owed:
                        owed[repo] = self.owed[repo]
                held = {repo: [s, sha] for repo, (s, sha) in owed.items()}
                write_json_atomic(self.path, {"failing_since": failing, "owed": held})
            self._learned.clear()
        except OSError as exc:  # a full disk costs the memory of an outage, never the pass
            log.warning("cannot keep the watcher's memory in %s: %s", self.path, exc)


LOCK_WAIT_S = 5.0  # another watcher holds the file's lock only for one read and one write


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """The memory file's lock (a file beside it), waited for at most LOCK_WAIT_S; OSError when
    it was not had by then (that save is missed, the next one carries it)."""
    lock = path.with_name(path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        until = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > until:
                    raise OSError(f"{lock} is held by another watcher") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # the kernel drops the lock with the descriptor


def _read(path: Path) -> tuple[dict[str, float], dict[str, tuple[float, str | None]]]:
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(MAX_BYTES + 1))
    except (OSError, ValueError):
        return {}, {}
    return _parse(data)


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
    return float(value) if ok and value < 1e11 else None


def _parse(data: Any) -> tuple[dict[str, float], dict[str, tuple[float, str | None]]]:
    """What a memory file holds, every odd entry dropped."""
    failing: dict[str, float] = {}
    owed: dict[str, tuple[float, str | None]] = {}
    if not isinstance(data, dict):
        return failing, owed
    since = data.get("failing_since")
    for repo, value in list(since.items())[:MAX_REPOS] if isinstance(since, dict) else []:
        if isinstance(repo, str) and (ts := _number(value)) is not None:
            failing[repo] = ts
    held = data.get("owed")
    for repo, value in list(held.items())[:MAX_REPOS] if isinstance(held, dict) else []:
        if not (isinstance(repo, str) and isinstance(value, list) and len(value) == 2):
            continue
        seconds, sha = _number(value[0]), value[1]
        if seconds is not None and (sha is None or (isinstance(sha, str) and _SHA.fullmatch(sha))):
            owed[repo] = (seconds, sha)
    return failing, owed


MEMORY = Memory()  # one per watcher process
