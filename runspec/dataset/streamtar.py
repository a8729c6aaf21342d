"""Extract a dataset tar while huggingface_hub is still downloading it.

Staging used to download the tar into the Hub cache, then read it twice more (the sha256, then the
extraction): 1.7-1.8 times a plain download of the same bytes (bench/bench_staging.py). Here a
thread follows the cache's temporary file as it grows and feeds it to `tarfile`'s stream mode, so
the extraction runs at the link's speed while huggingface_hub keeps what it owns: the request,
its retries, the cache, and the blob a restarted run finds again.

Every member passes the same checks as in runspec.dataset.safetar before it is written (the
filter, links, the member count, the disk's room and inodes), into a temporary folder that is
renamed into place only once the whole stream's sha256 equals the blob's. This is only a faster
road to the same result: anything unexpected (no temporary file seen, the writer not sequential,
a check that refuses, a hash that differs) throws the temporary folder away, and staging runs
safetar's two-pass extraction on the finished blob, which says the real error if there is one.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from runspec.dataset import safetar

BLOCK = 1 << 20  # bytes per read and per copy
POLL_S = 0.02  # how often the follower looks for new bytes at the end of the growing file
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Blob:
    """The tar as the Hub announced it: where huggingface_hub will write it, its ETag (the
    sha256 for an LFS file) and its size."""

    blobs: Path
    etag: str
    size: int


class _Abandoned(Exception):
    """The download failed or ended before the follower could finish; nothing is kept."""


class GrowingFile:
    """A reader of a file another thread is still appending to: at its end it waits for more
    until the writer is `done`. It hashes what it reads, in order."""

    def __init__(self, path: Path, done: threading.Event, abandon: threading.Event) -> None:
        self.fh = path.open("rb")
        self.done = done
        self.abandon = abandon
        self.digest = hashlib.sha256()
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        want = n if n >= 0 else 1 << 20
        while True:
            if self.abandon.is_set():
                raise _Abandoned()
            finished = self.done.is_set()  # read after looking: bytes written before it count
            block = self.fh.read(want)
            if block or finished:
                self.digest.update(block)
                self.count += len(block)
                return block
            time.sleep(POLL_S)

    def drain(self) -> None:
        """Read (and hash) what is left after the tar's end-of-archive blocks."""
        while self.read(1 << 20):
            pass

    def close(self) -> None:
        self.fh.close()


class StreamExtract:
    """Follow `blob`'s download and extract it into a temporary folder of `dest`; `finish`
    places it and writes safetar's marker, or answers None for the two-pass road."""

    def __init__(self, blob: Blob, dest: Path, key: str, max_files: int) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        self.blob = blob
        self.dest = dest.resolve()
        self.key = key
        self.max_files = max_files
        self.done = threading.Event()
        self.abandon = threading.Event()
        self.tmp: Path | None = None
        self.sha: str | None = None
        self.failure: str | None = None
        self.members = 0
        self.read_bytes = 0
        self.checker = safetar.MemberCheck(dest)
        self.before = set(self._incomplete())
        self.thread = threading.Thread(target=self._run, name="runspec-stream-extract", daemon=True)

    def __enter__(self) -> StreamExtract:
        self.thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.thread.is_alive():
            self.abandon.set()
            self.thread.join()
        self._discard()

    def _incomplete(self) -> list[Path]:
        # huggingface_hub writes `<etag>.<8 hex>.incomplete`, unique to its process.
        try:
            return sorted(self.blob.blobs.glob(f"{self.blob.etag}.*.incomplete"))
        except OSError:
            return []

    def _find(self) -> GrowingFile | None:
        while not self.done.is_set() and not self.abandon.is_set():
            for path in self._incomplete():
                if path not in self.before:
                    try:
                        return GrowingFile(path, self.done, self.abandon)
                    except FileNotFoundError:  # renamed into the blob between glob and open
                        return None
            time.sleep(POLL_S)
        return None

    def _run(self) -> None:
        reader = self._find()
        if reader is None:
            self.failure = "the download's temporary file was not seen"
            return
        self.tmp = Path(tempfile.mkdtemp(prefix=".runspec-tmp-", dir=self.dest))
        try:
            # Large reads and copies: the bytes' work (read, hash, write) then runs outside the
            # GIL, which the download's own thread needs (10 KB blocks slowed it by a third).
            with tarfile.open(  # type: ignore[call-overload]
                fileobj=reader, mode="r|*", bufsize=BLOCK
            ) as tar:
                tar.copybufsize = BLOCK
                self.checker = safetar.MemberCheck(self.tmp)
                for member in tar:
                    self._check(member, reader.count)
                    tar.extract(member, self.tmp, filter="data")
            reader.drain()
            self.sha = reader.digest.hexdigest()
            self.read_bytes = reader.count
        except _Abandoned:
            self.failure = "abandoned"
        except (tarfile.TarError, OSError, EOFError, safetar.UnsafeTarError) as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
        finally:
            reader.close()

    def _check(self, member: tarfile.TarInfo, read: int) -> None:
        """safetar's checks of one member, before any of its bytes are written."""
        self.members += 1
        if self.members > self.max_files:
            raise safetar.UnsafeTarError(f"more than {self.max_files} members")
        self.checker.check(member)
        st = os.statvfs(self.dest)
        if st.f_files and st.f_favail < 1:
            raise safetar.UnsafeTarError("no free inodes")
        # The download still to come needs its room too when it lands on the same filesystem.
        coming = self.blob.size - read if _same_device(self.blob.blobs, self.dest) else 0
        room = st.f_bavail * st.f_frsize - safetar.FREE_MARGIN_BYTES - coming
        if member.isfile() and member.size > room:
            raise safetar.UnsafeTarError("not enough room")

    def finish(self, tar_path: Path) -> safetar.ExtractResult | None:
        """After the download: the extraction placed and recorded, or None (say why in
        `failure`) when the two-pass road must run instead."""
        self.done.set()
        self.thread.join()
        if self.sha is None or self.tmp is None:
            self._discard()
            return None
        try:
            expected = _blob_sha256(tar_path, self.blob.etag)
            size = tar_path.stat().st_size
        except OSError as exc:
            self.failure = f"the blob cannot be read: {exc}"
            self._discard()
            return None
        if self.sha != expected or self.read_bytes != size:
            self.failure = "the stream did not match the blob (the writer was not sequential)"
            self._discard()
            return None
        return self._place(tar_path)

    def _place(self, tar_path: Path) -> safetar.ExtractResult:
        assert self.tmp is not None and self.sha is not None
        marker = safetar.marker_path(self.dest, self.key)
        known = safetar.read_marker(marker) or {}
        entries = sorted(p.name for p in self.tmp.iterdir())
        safetar.place(self.tmp, self.dest, entries, safetar.marker_entries(known) or ())
        safetar.write_marker(
            marker,
            {
                "tar": str(tar_path),
                "sha256": self.sha,
                "entries": entries,
                "bytes": self.checker.total,
                "source": safetar.source_identity(tar_path),
            },
        )
        self._discard()
        return safetar.ExtractResult(sha256=self.sha, entries=tuple(entries), skipped=False)

    def _discard(self) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def _same_device(a: Path, b: Path) -> bool:
    probe = a
    while not probe.exists():
        probe = probe.parent
    return probe.stat().st_dev == b.stat().st_dev


def _blob_sha256(tar_path: Path, etag: str) -> str:
    """The blob's sha256: its ETag for an LFS file (the cache names the blob by it), else read."""
    blob = tar_path.resolve()
    if _SHA256.fullmatch(etag) and blob.name == etag:
        return etag
    return safetar.sha256_file(blob)
