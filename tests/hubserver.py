"""A local stand-in for the Hugging Face Hub, stdlib only, for the real huggingface_hub client.

It speaks the subset of the Hub API that the client uses for uploads and downloads (see
/work/shared/notes/hub-api.md): repo create/info, preupload, the git-lfs batch API and a basic
PUT, commits, tree, paths-info and resolve. Repos live in memory with their full commit
history (so paths-info and resolve honour a commit id); LFS objects are streamed to files
under `storage`, never held whole in memory, so 200 MB uploads cost no RAM here either.

Tests steer it through its Python API: `fail()` injects HTTP 500s or dropped connections on
one kind of request, `lie_about_sha256()` makes paths-info report a wrong hash, `down()` /
`up()` make every request drop, `put_file()` seeds a repo, `read_file()` reads one back, and
`log` / `lfs_bytes_received` say what arrived, `flaky()` fails a share of every request (500, or
429 with Retry-After). Every answer carries the server's `Date` (http.server's own header).
`enable_xet()` turns on the Xet path (tests/hubxet.py: the token routes, xet-core's own content
store, the download bridge) and `limit_commits()` the Hub's commit quota (HTTP 429 in the Hub's
words).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import random
import secrets
import shutil
import socket
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

from tests.hubhandler import Handler
from tests.hubjobs import Jobs
from tests.hubrepo import (
    LFS_THRESHOLD,
    OPS,
    Entry,
    Fault,
    Flaky,
    Repo,
    Request,
    blob_id,
    lfs_entry,
)
from tests.hubxet import XetStore

__all__ = ["Entry", "HubServer", "Repo", "blob_id"]


class HubServer:
    def __init__(self, storage: Path, token: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.storage = storage
        self.token = token
        (storage / "lfs").mkdir(parents=True, exist_ok=True)
        (storage / "tmp").mkdir(parents=True, exist_ok=True)
        self.repos: dict[tuple[str, str], Repo] = {}
        self.log: list[Request] = []
        self.lfs_bytes_received = 0
        self._faults: dict[str, list[Fault]] = {}
        # LFS downloads (and the Xet bridge's) serve one byte flipped while the metadata stays
        # right (a rotten store).
        self.corrupt = False
        # Bytes per second for LFS bodies each way, as a rented machine's link has them
        # (bench/bench_budget_share.py); None: the loopback's own speed.
        self.link_rate: float | None = None
        # What /api/whoami-v2 says of the token; None: no such route (a mirror without it),
        # as most tests want. A test sets a user, a read-only role, other orgs.
        self.whoami: dict[str, object] | None = None
        # What the metadata check (POST /api/validate-yaml) says of every card it is shown,
        # beyond its own checks: the real Hub's checks are more than this server's.
        self.card_errors: list[str] = []
        self.jobs = Jobs()  # Hugging Face Jobs: what was asked of it (tests/hubjobs.py)
        # The Xet path (tests/hubxet.py), off until `enable_xet()`: then LFS files go through
        # xet-core's content store as they do on the real Hub.
        self.xet: XetStore | None = None
        # The commit quota (`limit_commits`): commits allowed per repo per hour, None: no limit.
        self.commit_limit: int | None = None
        self._commit_times: dict[str, list[float]] = {}
        self._lies: set[str] = set()
        self._lie_all = False
        self._down = False
        self.flaky_now: Flaky | None = None
        self.released = threading.Event()  # ends every hang
        self._lock = threading.RLock()
        self._conns: set[socket.socket] = set()
        handler = type("Handler", (Handler,), {"hub": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self._thread: threading.Thread | None = None

    # --- lifecycle --------------------------------------------------------------------------
    def start(self) -> HubServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        # Kept-alive connections outlive the listener: cut them, or a later server given the
        # same port would see this one answer its clients.
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def enable_xet(self) -> XetStore:
        """Serve the Xet token routes and the bridge; commits then find LFS files in the store."""
        if self.xet is None:
            self.xet = XetStore(self.storage / "cas")
        return self.xet

    def limit_commits(self, per_hour: int) -> None:
        """The Hub's commit quota: past `per_hour` commits to a repo within an hour, a commit
        is refused with HTTP 429 and the Hub's own words, "You have exceeded the rate limit for
        repository commits (128 per hour). You can retry this action in 43 minutes" (seen in
        a public upload log; /work/shared/notes/hub-api.md, "Commit quota and rate limits")."""
        self.commit_limit = per_hour

    def quota_refusal(self, repo_id: str) -> str | None:
        """Take one commit of the repo's hour (called with the lock held); the 429's message
        when the quota is spent."""
        if self.commit_limit is None:
            return None
        now = time.monotonic()
        times = [t for t in self._commit_times.get(repo_id, []) if t > now - 3600]
        if len(times) >= self.commit_limit:
            minutes = max(1, math.ceil((times[0] + 3600 - now) / 60))
            return (
                "You have exceeded the rate limit for repository commits "
                f"({self.commit_limit} per hour). You can retry this action in {minutes} minutes"
            )
        self._commit_times[repo_id] = [*times, now]
        return None

    # --- fault injection --------------------------------------------------------------------
    def fail(
        self,
        op: str,
        mode: str = "500",
        times: int = 1,
        status: int = 400,
        method: str | None = None,
        where: str | None = None,
    ) -> None:
        """The next `times` requests of kind `op` answer 500, drop the connection, hang
        ("hang": no answer until `stop()`, at most HANG_S, then a dropped connection), or
        ("echo") answer `status` with an error message and a header that quote the request's
        headers, Authorization included, as a careless proxy might: a test that the client's
        token is scrubbed. `method`: only requests with that method (a download's GET, not
        the HEAD before it). `where`: only requests whose path holds it (one repo's)."""
        if op not in OPS or mode not in ("500", "drop", "echo", "hang"):
            raise ValueError(f"unknown fault {op}/{mode}")
        with self._lock:
            self._faults.setdefault(op, []).append(Fault(mode, times, status, method, where))

    def flaky(self, rate: float, mode: str = "500", retry_after: int = 1, seed: int = 35) -> None:
        """From now on, a share `rate` of every request (any kind, drawn from a seeded
        generator) answers 500, or 429 with `Retry-After: retry_after` as the Hub's rate
        limit does (https://huggingface.co/docs/hub/rate-limits), until `clear_faults()`."""
        if mode not in ("500", "429") or not 0.0 <= rate <= 1.0:
            raise ValueError(f"unknown incident {mode}/{rate}")
        with self._lock:
            self.flaky_now = Flaky(rate, mode, retry_after, random.Random(seed))

    def _take_flaky(self) -> Flaky | None:
        with self._lock:
            flaky = self.flaky_now
            return flaky if flaky is not None and flaky.rng.random() < flaky.rate else None

    def clear_faults(self) -> None:
        """Every fault asked for and not yet taken is dropped (the outage is over)."""
        with self._lock:
            self._faults.clear()
            self.flaky_now = None

    def lie_about_sha256(self, path: str | None = None) -> None:
        """paths-info reports a wrong sha256 (and blob id) for `path`, or for every file."""
        with self._lock:
            if path is None:
                self._lie_all = True
            else:
                self._lies.add(path)

    def tell_truth(self) -> None:
        with self._lock:
            self._lies.clear()
            self._lie_all = False

    def down(self) -> None:
        """Every request drops its connection until `up()`."""
        self._down = True

    def up(self) -> None:
        self._down = False

    def _take_fault(self, op: str, method: str, path: str = "") -> Fault | None:
        with self._lock:
            queue = self._faults.get(op) or []
            if not queue or queue[0].method not in (None, method):
                return None
            if queue[0].where is not None and queue[0].where not in path:
                return None
            fault = queue[0]
            fault.times -= 1
            if fault.times <= 0:
                queue.pop(0)
            return fault

    # --- inspection and seeding ---------------------------------------------------------------
    def bytes_stored(self) -> int:
        """File bytes that reached the store, through LFS uploads or Xet's xorbs."""
        return self.lfs_bytes_received + (self.xet.stored_bytes() if self.xet else 0)

    def count(self, op: str, status: int | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.log if r.op == op and (status is None or r.status == status))

    def lose_files(self, repo_id: str, repo_type: str = "model") -> None:
        """Every file of the repo gone from its head (as after the repo was emptied)."""
        with self._lock:
            repo = self.repo(repo_id, repo_type)
            self._commit(repo, {}, set(repo.head), "lost")

    def repo(self, repo_id: str, repo_type: str = "model") -> Repo:
        return self.repos[(repo_type, repo_id)]

    def files(self, repo_id: str, repo_type: str = "model", revision: str = "main") -> list[str]:
        found = self.repo(repo_id, repo_type).at(revision)
        return sorted(found[1]) if found else []

    def entry(self, repo_id: str, path: str, repo_type: str = "model") -> Entry:
        return self.repo(repo_id, repo_type).head[path]

    def read_file(
        self, repo_id: str, path: str, repo_type: str = "model", revision: str = "main"
    ) -> bytes:
        found = self.repo(repo_id, repo_type).at(revision)
        if found is None:
            raise KeyError(revision)
        entry = found[1][path]
        if entry.data is not None:
            return entry.data
        if entry.xet_hash is not None and self.xet is not None:
            return self.xet.read(entry.xet_hash, entry.size)
        assert entry.sha256 is not None
        return self.lfs_path(entry.sha256).read_bytes()

    def lfs_path(self, sha256: str) -> Path:
        return self.storage / "lfs" / sha256

    def put_file(
        self,
        repo_id: str,
        path: str,
        data: bytes | None,
        repo_type: str = "dataset",
        message: str = "seed",
        author: str | None = None,
    ) -> str:
        """Seed a repo (created when missing) with one file (None: delete it), made by
        `author` where given; returns the commit id."""
        with self._lock:
            repo = self.repos.get((repo_type, repo_id))
            if repo is None:
                repo = self.repos[(repo_type, repo_id)] = Repo(repo_id, repo_type, private=True)
            if data is None:
                oid = self._commit(repo, {}, {path}, message)
            elif len(data) > LFS_THRESHOLD or b"\0" in data[:512]:
                sha = hashlib.sha256(data).hexdigest()
                self.lfs_path(sha).write_bytes(data)
                entry = lfs_entry(path, sha, len(data))
            else:
                entry = Entry(path, len(data), blob_id(data), data=data)
            if data is not None:
                oid = self._commit(repo, {path: entry}, set(), message)
            if author is not None:
                repo.authors[oid] = author
            return oid

    def put_path(self, repo_id: str, path: str, source: Path, repo_type: str = "dataset") -> str:
        """Seed a repo with a large file from disk as an LFS object, never read whole."""
        digest = hashlib.sha256()
        with source.open("rb") as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
        sha = digest.hexdigest()
        shutil.copyfile(source, self.lfs_path(sha))
        with self._lock:
            repo = self.repos.get((repo_type, repo_id))
            if repo is None:
                repo = self.repos[(repo_type, repo_id)] = Repo(repo_id, repo_type, private=True)
            entry = lfs_entry(path, sha, source.stat().st_size)
            return self._commit(repo, {path: entry}, set(), "seed")

    def _commit(self, repo: Repo, adds: dict[str, Entry], deletes: set[str], message: str) -> str:
        files = {p: e for p, e in repo.head.items() if p not in deletes}
        files.update(adds)
        oid = hashlib.sha1(f"{repo.sha}{secrets.token_hex(8)}".encode()).hexdigest()
        repo.commits.append((oid, files, message))
        repo.times[oid] = time.time()
        return oid
