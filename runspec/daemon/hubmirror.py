"""A followed branch of a Hub repository (`hf://datasets/acme/experiments`), read through the
Hub's API with the Hub token the box already has: the branch's head commit, the tree under the
spec folder at that commit (each file's git blob id, as the Hub lists it), each spec's bytes,
and the commit that last touched it. It answers as runspec.daemon.gitmirror.Mirror does, so
the follower keys a Hub spec by (repository, path, blob id) as it keys a git one.

A Hub repository is as hostile as any other: the head and the commit list are read by the one
capped reader of Hub files (runspec.hubread: size, total time, strict JSON), the listing stops
past MAX_ENTRIES entries and within LIST_TIMEOUT_S, a name that is not plain printable text is
refused, a file is read only when the listing says it fits in a spec (runspec.spec.yamlload.
MAX_BYTES) and is read capped at that size, and bytes that are not the blob the listing named
(a branch moved between the two reads, a lying mirror) are never used.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any
from urllib.parse import quote

from runspec.daemon.gitmirror import MAX_ENTRIES, CommitInfo, Entry, GitError, hub_repo
from runspec.hubreach import endpoint_set
from runspec.hubread import HubReadError, fetch, one_line, strict_json, within
from runspec.spec.yamlload import MAX_BYTES

MAX_PATH = 400  # characters of one path
LIST_TIMEOUT_S = 60.0
READ_TIMEOUT_S = 30.0
HEAD_BYTES = 1 << 20  # the revision's info (its file list comes with it on some Hubs)
COMMITS_BYTES = 256 * 1024  # one page of the commit list: who made a commit
_SHA = re.compile(r"[0-9a-f]{40}")
_PLAIN = re.compile(r"[A-Za-z0-9._/ +@=,-]+")


def _plain(text: Any, limit: int = 200) -> str:
    """A title or a user name the Hub gave: one printable line, at most `limit` characters."""
    if not isinstance(text, str) or not text:
        return ""
    return "".join(c if c.isprintable() else " " for c in text.splitlines()[0])[:limit]


def _git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's own blob id


class HubSource:
    """One followed Hub repository; the same reads as a git Mirror, over the Hub's API."""

    def __init__(self, url: str) -> None:
        found = hub_repo(url)
        if found is None:
            raise GitError(f"{url!r} is not a Hub repository URL")
        self.url = url
        self.kind, self.repo = found
        self.head = ""
        self.files: dict[str, tuple[str, int, str | None]] = {}  # blob: (path, size, sha256)
        self.read_bytes: dict[str, bytes] = {}

    def _base(self) -> str:
        from huggingface_hub import constants

        return (endpoint_set() or constants.ENDPOINT).rstrip("/")

    def _api(self) -> Any:
        from huggingface_hub import HfApi

        return HfApi(endpoint=endpoint_set())

    def kill(self) -> None:
        """Nothing to end: every read here ends within its own total time."""

    def fetch(self, branch: str) -> str:
        """The branch's head commit."""
        url = f"{self._base()}/api/{self.kind}s/{self.repo}/revision/{quote(branch, safe='')}"
        try:  # only the sha (hf_api.dataset_info's `expand`): a repo's file list can be long
            data = fetch(f"{url}?expand=sha", max_bytes=HEAD_BYTES, total_s=READ_TIMEOUT_S)
            info = None if data is None else strict_json(data)
        except HubReadError as exc:
            raise GitError(f"the Hub's {self.kind} {self.repo}: {exc}") from exc
        if info is None:
            raise GitError(
                f"the Hub has no {self.kind} {self.repo} with a branch {branch!r} that this "
                "box's Hub token can read"
            )
        sha = info.get("sha") if isinstance(info, dict) else None
        if not isinstance(sha, str) or not _SHA.fullmatch(sha):
            raise GitError(f"the Hub's {self.kind} {self.repo}: its head is not a commit id")
        self.head, self.files, self.read_bytes = sha, {}, {}
        return sha

    def specs(self, commit: str, folder: str) -> list[Entry]:
        """Every file under `folder` at `commit`, each with its blob id; a name that is no
        plain path is an entry refused."""
        from huggingface_hub.errors import EntryNotFoundError
        from huggingface_hub.hf_api import RepoFile

        def listing() -> list[Any]:
            items: list[Any] = []
            tree = self._api().list_repo_tree(
                self.repo, folder, recursive=True, revision=commit, repo_type=self.kind
            )
            for item in tree:
                if len(items) >= MAX_ENTRIES:  # files and folders, as a git folder counts them
                    raise GitError(
                        f"over {MAX_ENTRIES} entries under {folder}/: follow a folder of specs"
                    )
                items.append(item)
            return items

        try:
            items = within(LIST_TIMEOUT_S, f"listing {self.repo}", listing)
        except EntryNotFoundError:
            return []
        except GitError:
            raise
        except Exception as exc:  # the client's or the network's: a line and a retry
            raise GitError(
                f"the Hub's {self.kind} {self.repo}: cannot list {folder}/: {one_line(exc)}"
            ) from exc
        entries = []
        for item in items:
            if not isinstance(item, RepoFile):
                continue
            path, blob = str(item.path), str(item.blob_id)
            if (
                len(path) > MAX_PATH
                or not path.startswith(f"{folder}/")
                or not all(c.isprintable() for c in path)
                or ".." in path.split("/")
                or not _SHA.fullmatch(blob)
            ):
                entries.append(Entry(path[:MAX_PATH], blob[:40], "odd", "an odd name"))
                continue
            sha256 = item.lfs.sha256 if item.lfs is not None else None
            self.files[blob] = (path, int(item.size), sha256)
            entries.append(Entry(path, blob, "100644"))
        return entries

    def size(self, blob: str) -> int:
        return self.files[blob][1]

    def read(self, blob: str) -> bytes:
        """The blob's bytes at the head, capped at a spec's size and checked against the id
        the listing gave (or its LFS sha256)."""
        if blob in self.read_bytes:
            return self.read_bytes[blob]
        from huggingface_hub import hf_hub_url

        path, _size, sha256 = self.files[blob]
        url = hf_hub_url(
            self.repo, path, repo_type=self.kind, revision=self.head, endpoint=endpoint_set()
        )
        try:
            data = fetch(url, max_bytes=MAX_BYTES, total_s=READ_TIMEOUT_S)
        except HubReadError as exc:
            raise GitError(f"the Hub's {self.kind} {self.repo}: {path}: {exc}") from exc
        if data is None:
            raise GitError(f"the Hub's {self.kind} {self.repo}: {path} went away while read")
        got = hashlib.sha256(data).hexdigest() if sha256 else _git_blob(data)
        if got != (sha256 or blob):
            raise GitError(f"the Hub's {self.kind} {self.repo}: {path} is not the blob listed")
        self.read_bytes[blob] = data
        return data

    def last_commit(self, commit: str, path: str) -> CommitInfo:
        """The commit that last touched `path` up to `commit` (the Hub's lastCommit), with its
        authors where the Hub names them; the head itself when the Hub does not say."""
        try:
            infos = within(
                READ_TIMEOUT_S,
                f"reading {path}",
                lambda: self._api().get_paths_info(
                    self.repo, [path], expand=True, revision=commit, repo_type=self.kind
                ),
            )
            last = infos[0].last_commit if infos else None
        except Exception:  # no provenance beyond the head is no reason to refuse the spec
            last = None
        oid = getattr(last, "oid", None)
        if not isinstance(oid, str) or not _SHA.fullmatch(oid):
            return CommitInfo(commit, *self._authors(commit), "")
        date = getattr(last, "date", None)
        when = date.isoformat() if date is not None else ""
        author, _title = self._authors(oid)
        return CommitInfo(oid, author, _plain(getattr(last, "title", "")), when)

    def _authors(self, oid: str) -> tuple[str, str]:
        """(its authors, its title) from the commit list that starts at `oid` ('' unknown)."""
        url = f"{self._base()}/api/{self.kind}s/{self.repo}/commits/{oid}"
        try:
            data = fetch(url, max_bytes=COMMITS_BYTES, total_s=READ_TIMEOUT_S)
            page = strict_json(data) if data is not None else None
        except HubReadError:
            return "", ""
        first = page[0] if isinstance(page, list) and page else None
        if not isinstance(first, dict) or first.get("id") != oid:
            return "", ""
        users = [a.get("user") for a in first.get("authors") or () if isinstance(a, dict)]
        names = ", ".join(u for u in users if isinstance(u, str) and _PLAIN.fullmatch(u))
        return names[:200], _plain(first.get("title"))
