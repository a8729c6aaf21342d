"""Reading a run back from its push target: what a fresh disk needs to go on with a run.

A `--resume` on a machine that never saw the run (a new state folder and run folder) reads the
target's `runspec/record.json` and `runspec/manifest.json` at one commit, then downloads the
newest checkpoint the manifest lists and checks its size and sha256 against the manifest before
anything trains from it. Hub files are streamed at that commit, never through the Hub cache;
a folder target is read where it lies. Every read is capped or hashed: the target's answers
are data, never trusted as a run's until they check out.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runspec.hubreach import endpoint_set
from runspec.hubread import HostileFile, HubReadError, HubRefused, TooBig, fetch, strict_json
from runspec.hubread import head as hub_head
from runspec.push.base import PushFailed, one_line
from runspec.push.dirtarget import DirTarget
from runspec.push.hubrecord import RECORD
from runspec.push.manifest import CHUNK, Manifest, ManifestEntry
from runspec.push.owner_check import MAX_BYTES
from runspec.push.remote import MANIFEST
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths


@dataclass(frozen=True)
class Pushed:
    """What the target holds of a run, read at one commit."""

    where: str  # for people: "hub me/run1", "dir /mnt/vol/run1"
    commit: str | None
    record: dict[str, Any] | None
    manifest: Manifest | None


class Source:
    """One target's files, read (not written) at one commit."""

    def __init__(
        self, *, hub: str | None = None, folder: Path | None = None, commit: str | None = None
    ) -> None:
        self.hub, self.folder, self.commit = hub, folder, commit
        self.where = f"hub {hub}" if hub else f"dir {folder}"

    @classmethod
    def of(cls, spec: Spec, paths: RunPaths) -> Source:
        assert spec.push is not None
        if spec.push.hub is not None:
            return cls(hub=spec.push.hub.repo)

        return cls(folder=DirTarget.folder(spec, paths))

    def pin(self) -> bool:
        """Fix the commit every read uses (the Hub's head now); False when there is no run."""
        if self.hub is None:
            return self.folder is not None and self.folder.is_dir()
        try:  # within the one capped reader's total time (`repo_info` has none)
            sha = hub_head(self.hub)
        except HubReadError as exc:  # the network's, the Hub's, or a hostile answer
            refused = isinstance(exc, HubRefused)  # the token's: again would not change it
            raise PushFailed(f"cannot read {self.where}: {exc}", permanent=refused) from exc
        if sha is None:
            return False
        self.commit = sha
        return True

    def open(self, relpath: str) -> Any:
        """A context manager yielding chunks of the file, or raising FileNotFoundError."""
        if self.folder is not None:
            return _FileChunks(self.folder, relpath)
        return _HubChunks(self.hub or "", relpath, self.commit)

    def small(self, relpath: str, max_bytes: int = MAX_BYTES) -> bytes | None:
        """The file's bytes (None: not there). Raises TooBig over `max_bytes` (not a file
        runspec wrote) and PushFailed."""
        if self.hub is not None:  # the one capped reader of Hub files: a total time, a cap
            return self._small_at_hub(relpath, max_bytes)
        data = bytearray()
        try:
            with self.open(relpath) as chunks:
                for chunk in chunks:
                    data += chunk
                    if len(data) > max_bytes:
                        raise TooBig(f"{relpath} at {self.where} is over {max_bytes} bytes")
        except FileNotFoundError:
            return None
        return bytes(data)

    def _small_at_hub(self, relpath: str, max_bytes: int) -> bytes | None:
        from huggingface_hub import hf_hub_url

        url = hf_hub_url(self.hub or "", relpath, revision=self.commit, endpoint=endpoint_set())
        try:
            return fetch(url, max_bytes=max_bytes)
        except TooBig as exc:
            raise TooBig(f"{relpath} at {self.where} is {exc}") from exc
        except HostileFile as exc:
            raise PushFailed(f"{relpath} at {self.where} is not runspec's: {exc}") from exc
        except HubReadError as exc:
            refused = isinstance(exc, HubRefused)
            raise PushFailed(
                f"cannot read {relpath} at {self.where}: {exc}", permanent=refused
            ) from exc

    def download(self, entry: ManifestEntry, dest: Path) -> None:
        """The file to `dest`, only once its size and sha256 are the manifest's."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        digest, size = hashlib.sha256(), 0
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
        try:
            with os.fdopen(fd, "wb") as out, self.open(entry.path) as chunks:
                for chunk in chunks:
                    size += len(chunk)
                    if size > entry.size:
                        break
                    digest.update(chunk)
                    out.write(chunk)
            if size != entry.size or digest.hexdigest() != entry.sha256:
                raise PushFailed(
                    f"{entry.path} from {self.where} is not the verified checkpoint: "
                    f"{size} bytes with sha256 {digest.hexdigest()[:12]}, the manifest says "
                    f"{entry.size} bytes with sha256 {entry.sha256[:12]}"
                )
            os.replace(tmp, dest)
        except FileNotFoundError as exc:
            raise PushFailed(f"{entry.path} is listed at {self.where} but not there") from exc
        finally:
            Path(tmp).unlink(missing_ok=True)


class _FileChunks:
    def __init__(self, root: Path, relpath: str) -> None:
        path = (root / relpath).resolve()
        if not path.is_relative_to(root.resolve()):
            raise FileNotFoundError(relpath)
        self.path = path

    def __enter__(self) -> Any:
        self.fh = self.path.open("rb")
        return iter(lambda: self.fh.read(CHUNK), b"")

    def __exit__(self, *exc: object) -> None:
        self.fh.close()


class _HubChunks:
    def __init__(self, repo: str, relpath: str, commit: str | None) -> None:
        from huggingface_hub import hf_hub_url

        endpoint = endpoint_set()
        self.url = hf_hub_url(repo, relpath, revision=commit, endpoint=endpoint)

    def __enter__(self) -> Any:
        from huggingface_hub.utils import build_hf_headers, get_session

        headers = {**build_hf_headers(), "Accept-Encoding": "identity"}
        try:
            self.stream = get_session().stream(
                "GET", self.url, headers=headers, follow_redirects=True, timeout=60.0
            )
            resp = self.stream.__enter__()
        except Exception as exc:  # the client's network errors are not OSError
            raise PushFailed(f"reading {self.url}: {one_line(exc)}") from exc
        if resp.status_code == 404:
            self.stream.__exit__(None, None, None)
            raise FileNotFoundError(self.url)
        if resp.status_code != 200:
            self.stream.__exit__(None, None, None)
            raise PushFailed(f"reading {self.url} got HTTP {resp.status_code}")
        return self._chunks(resp)

    def _chunks(self, resp: Any) -> Iterator[bytes]:
        try:
            yield from resp.iter_raw()
        except Exception as exc:  # a connection cut half-way through the body
            raise PushFailed(f"reading {self.url}: {one_line(exc)}") from exc

    def __exit__(self, *exc: object) -> None:
        self.stream.__exit__(None, None, None)


def read_pushed(spec: Spec, paths: RunPaths, commit: str | None = None) -> Pushed:
    """The run's record and manifest at its target (None where not there or not readable as
    such), at `commit` on the Hub where given, else its head; raises PushFailed when the
    target cannot be read at all."""
    source = Source.of(spec, paths)
    if commit is not None and source.hub is not None:
        source.commit = commit
    elif not source.pin():
        return Pushed(source.where, None, None, None)
    record: dict[str, Any] | None = None
    manifest: Manifest | None = None
    try:
        raw = source.small(RECORD)
        loaded = strict_json(raw) if raw else None  # someone else's bytes: runspec.hubread
        record = loaded if isinstance(loaded, dict) else None
        raw = source.small(MANIFEST)
        manifest = Manifest.from_json(strict_json(raw)) if raw else None
    except (HostileFile, ValueError, KeyError, TypeError) as exc:  # reading it again is the same
        damaged = f"{source.where} holds a damaged runspec record: {one_line(exc)}"
        raise PushFailed(damaged, permanent=True) from exc
    except OSError as exc:
        raise PushFailed(f"cannot read {source.where}: {one_line(exc)}") from exc
    return Pushed(source.where, source.commit, record, manifest)
