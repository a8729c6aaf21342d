"""The Hub target: a Hugging Face model repo, through huggingface_hub (no hand-written HTTP).

One `create_commit` per push; huggingface_hub does preupload, LFS (or, on the real Hub,
hf_xet) and its own retries of the uploads. Verification reads `get_paths_info` at the very
commit the push returned and compares each file's size and sha256 (LFS) or git blob id
(regular files) with the staged copy's. An LFS file's sha256 there is the hash the client
declared (with Xet, hf_xet records a given one as given), so `verify` then reads back each LFS
file the push sent, at that commit (streamed, never into the Hub cache), and hashes the bytes
the Hub really serves: a push is verified only by bytes read.

huggingface_hub is imported only when the target works, so listing targets stays light. The
endpoint is read from HF_ENDPOINT when a push starts; the token is huggingface_hub's own choice
(HF_TOKEN, else the stored login) and never passes through runspec's hands.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runspec.checkresult import CheckResult, failed, passed, warned
from runspec.clock import human_duration
from runspec.hubreach import UNREACHABLE_FIX, endpoint_set, unreachable
from runspec.hubread import HubReadError, fetch
from runspec.push.base import PushFailed, PushTarget, StagedFile, one_line
from runspec.push.manifest import ManifestEntry
from runspec.push.owner_check import (
    EARLIER_FIX,
    MAX_BYTES,
    REUSE_FIX,
    ROLE_FIX,
    earlier_run,
    held_elsewhere,
    may_not_write,
)
from runspec.push.quota import QUOTA_FIX, cadence_warning, quota_refusal
from runspec.push.remote import RECORD
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths

if TYPE_CHECKING:
    from huggingface_hub import HfApi

PATHS_INFO_BATCH = 50
READ_TIMEOUT_S = 60.0  # a read-back that stalls this long is a failed read-back

# httpcore's DEBUG trace logs raw response headers; a proxy that echoes the Authorization
# header would put the token into `runspec -v`'s log. Nothing runspec needs is logged there.
for _name in ("httpcore", "httpcore2"):
    if logging.getLogger(_name).level < logging.INFO:
        logging.getLogger(_name).setLevel(logging.INFO)


def _token() -> str | None:
    from huggingface_hub import get_token

    return os.environ.get("HF_TOKEN") or get_token()


class HubTarget(PushTarget):
    key = "hub"

    def __init__(self, repo: str, private: bool = True, reuse: bool = False) -> None:
        self.repo = repo
        self.private = private
        self.reuse = reuse  # push.hub.reuse: may write over another run's files
        self.description = f"hub {repo}"
        self.landed = False  # a push of this run landed: the head is its own

    @classmethod
    def from_spec(cls, spec: Spec, paths: RunPaths) -> HubTarget:
        assert spec.push is not None and spec.push.hub is not None
        return cls(spec.push.hub.repo, spec.push.hub.private, spec.push.hub.reuse)

    @classmethod
    def where(cls, spec: Spec, paths: RunPaths) -> str:
        assert spec.push is not None and spec.push.hub is not None
        return f"hub {spec.push.hub.repo}"

    @classmethod
    def preflight(cls, spec: Spec, paths: RunPaths) -> CheckResult:
        """Whether the token may write to the repo: asked, never tried (the repo is created
        at the first push, so a typo here leaves no stray repo behind)."""
        from huggingface_hub import HfApi
        from huggingface_hub.errors import HfHubHTTPError

        assert spec.push is not None and spec.push.hub is not None
        repo = spec.push.hub.repo
        token = _token()
        if not token:
            return failed(
                "push",
                f"no Hub token to push to {repo}",
                "give the daemon HF_TOKEN (a write token) in /etc/runspec/env, or `hf auth login`",
            )
        api = HfApi(endpoint=endpoint_set(), token=token)
        try:
            who: dict[str, Any] | None = api.whoami()
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else 0
            if status in (401, 403):
                return failed(
                    "push",
                    f"the Hub rejected the token: it cannot push to {repo}",
                    "give the daemon a valid write token (HF_TOKEN) in /etc/runspec/env",
                )
            who = None  # a Hub without whoami (a mirror): the first push tells
        except Exception as exc:  # the network's fault is said so; anything else crashes on
            cannot = unreachable(exc)
            if cannot is None:
                raise
            return failed("push", f"{cannot} (pushing to {repo})", UNREACHABLE_FIX)
        refusal = may_not_write(who, repo)
        if refusal is not None:
            return failed("push", refusal, ROLE_FIX)
        try:
            exists = api.repo_exists(repo, repo_type="model")
        except (HfHubHTTPError, OSError) as exc:
            return failed("push", f"cannot ask the Hub about {repo}: {one_line(exc)}", "")
        if exists and (refused := not_this_runs(spec, paths)) is not None:
            return failed("push", *refused)
        user = f"{who['name']}'s token" if who and who.get("name") else "the token"
        made = "with the run's first lease" if spec.watch.lease else "at the first push"
        private = "private" if spec.push.hub.private else "public"
        state = "exists" if exists else f"will be created ({private}) {made}"
        said = f"{user} may write to model repo {repo}, which {state}"
        if (cadence := cadence_warning(spec.push.every, spec.watch.lease)) is not None:
            return warned("push", f"{said}; {cadence}", QUOTA_FIX)
        return passed("push", said)

    def _api(self) -> HfApi:
        from huggingface_hub import HfApi

        return HfApi(endpoint=endpoint_set())

    def _ensure_repo(self, api: HfApi) -> bool:
        """Create the repo (private unless the spec says otherwise) when it is missing; True
        when it was (a new repo holds no other run).

        Asked on every push: it is one cheap GET that the client does not retry, so an
        unreachable Hub fails the push at once instead of after the client's upload backoff.
        """
        from huggingface_hub.errors import RepositoryNotFoundError

        try:
            api.repo_info(self.repo, repo_type="model")
        except RepositoryNotFoundError:
            api.create_repo(self.repo, repo_type="model", private=self.private, exist_ok=True)
            return True
        return False

    def push(self, uploads: Sequence[StagedFile], message: str) -> str | None:
        from huggingface_hub import CommitOperationAdd

        api = self._api()
        try:
            fresh = self._ensure_repo(api)
            if not (fresh or self.reuse or self.landed):
                self._refuse_earlier(uploads)
            operations = []
            declare = not _through_xet()
            for item in uploads:
                op = CommitOperationAdd(path_in_repo=item.entry.path, path_or_fileobj=item.local)
                if declare:
                    # LFS: hashed once already, on this very copy; spare the client a second
                    # pass (the read-back in `verify` proves the bytes).
                    op.upload_info.sha256 = bytes.fromhex(item.entry.sha256)
                operations.append(op)
            info = api.create_commit(
                self.repo, operations=operations, commit_message=message, repo_type="model"
            )
        except PushFailed:
            raise  # this push's own refusal, said as it is
        except Exception as exc:  # any client or network error fails this push only
            quota = quota_refusal(exc)
            if quota is not None:
                wait = f"the Hub says to retry in {human_duration(quota)}" if quota else ""
                raise PushFailed(
                    f"push to {self.description} refused by the Hub's commit quota "
                    f"(HTTP 429{': ' + wait if wait else ''}): {one_line(exc)}",
                    retry_after=quota,
                ) from exc
            status = refusal_status(exc)
            if status is not None:
                raise PushFailed(
                    f"push to {self.description} refused (HTTP {status}, not an outage: trying "
                    f"again does not change it): {one_line(exc)}",
                    permanent=True,
                ) from exc
            raise PushFailed(f"push to {self.description} failed: {one_line(exc)}") from exc
        self.landed = True
        return str(info.oid)

    def _refuse_earlier(self, uploads: Sequence[StagedFile]) -> None:
        """Preflight asked already, but a run may skip it, or a run of the same name may
        have pushed since: the head's record is read before this run's first commit."""
        staged = next((u for u in uploads if u.entry.path == RECORD), None)
        if staged is None:
            return
        try:
            ours = json.loads(staged.local.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if not isinstance(ours, dict) or not isinstance(ours.get("name"), str):
            return
        where = f"model repo {self.repo}"
        earlier = earlier_run(where, ours["name"], ours, lambda p: _small_file(self.repo, p))
        if earlier is not None:
            raise PushFailed(
                f"push to {self.description} refused: {earlier}; {EARLIER_FIX}", permanent=True
            )

    def verify(
        self, commit: str | None, expected: Sequence[ManifestEntry], uploaded: Sequence[StagedFile]
    ) -> list[str]:
        paths = [e.path for e in expected]
        remote: dict[str, object] = {}
        try:
            api = self._api()
            for start in range(0, len(paths), PATHS_INFO_BATCH):
                batch = paths[start : start + PATHS_INFO_BATCH]
                for item in api.get_paths_info(self.repo, batch, revision=commit):
                    remote[item.path] = item
        except Exception as exc:  # unverifiable is a verification failure
            return [f"could not read the files at commit {commit}: {one_line(exc)}"]
        problems = [p for e in expected if (p := _compare(e, remote.get(e.path)))]
        if problems:
            return problems
        # The record of an LFS (Xet) file is the sha256 the client declared, or hashed on the
        # client: only the bytes the Hub serves prove it. A regular file's blob id is the
        # Hub's own hash of what it received.
        declared = [
            item.entry
            for item in uploaded
            if getattr(remote.get(item.entry.path), "lfs", None) is not None
        ]
        return [f"read-back: {p}" for p in self.read_back(commit, declared)]

    def read_back(self, commit: str | None, entries: Sequence[ManifestEntry]) -> list[str]:
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers, get_session

        problems = []
        session = get_session()
        for entry in entries:
            url = hf_hub_url(self.repo, entry.path, revision=commit, endpoint=endpoint_set())
            digest, size = hashlib.sha256(), 0
            try:
                # identity: the bytes as stored, so iter_raw (no re-chunking: twice as fast as
                # iter_bytes here) hashes exactly what the Hub keeps.
                headers = {**build_hf_headers(), "Accept-Encoding": "identity"}
                with session.stream(
                    "GET", url, headers=headers, follow_redirects=True, timeout=READ_TIMEOUT_S
                ) as resp:
                    if resp.status_code != 200:
                        problems.append(f"{entry.path}: read-back got HTTP {resp.status_code}")
                        continue
                    for chunk in resp.iter_raw():
                        digest.update(chunk)
                        size += len(chunk)
            except Exception as exc:  # a read-back that fails is a push not proven
                problems.append(f"{entry.path}: read-back failed: {one_line(exc)}")
                continue
            if size != entry.size or digest.hexdigest() != entry.sha256:
                problems.append(
                    f"{entry.path}: the Hub serves {size} bytes with sha256 "
                    f"{digest.hexdigest()[:12]}, not the {entry.size} bytes with sha256 "
                    f"{entry.sha256[:12]} it recorded"
                )
        return problems


# A 4xx that a retry cannot turn into a success; 408 (timeout) and 429 (slow down) can.
PERMANENT_STATUSES = frozenset({400, 401, 403, 404, 405, 409, 410, 411, 413, 422})


def refusal_status(exc: BaseException) -> int | None:
    """The HTTP status of a client error that is the Hub's answer, not an outage; else None."""
    from huggingface_hub.errors import HfHubHTTPError

    if not isinstance(exc, HfHubHTTPError) or exc.response is None:
        return None
    status = int(exc.response.status_code)
    return status if status in PERMANENT_STATUSES else None


def _through_xet() -> bool:
    """Whether huggingface_hub will upload LFS files through Xet (hf_xet installed and not
    turned off): hf_xet then records a declared sha256 as given (Sha256Policy::Provided in
    xet-core) instead of hashing the bytes it sends, so none is declared and it hashes them."""
    from huggingface_hub.utils._runtime import is_xet_available

    return bool(is_xet_available())


def _small_file(repo: str, path: str) -> bytes | None:
    """A small file of the repo's main branch, through the one capped reader of Hub files
    (runspec.hubread: a size cap and a total time); None when it is not there or cannot be
    read (the owner check then has nothing to go on, and says nothing)."""
    from huggingface_hub import hf_hub_url

    try:
        return fetch(hf_hub_url(repo, path, endpoint=endpoint_set()), max_bytes=MAX_BYTES)
    except HubReadError:
        return None


def not_this_runs(spec: Spec, paths: RunPaths) -> tuple[str, str] | None:
    """Why the run may not write to its repo, which exists: it holds another run's files, or
    an earlier run's of the same name; (why, fix), or None when it may (push.hub.reuse says
    so, or the repo holds no other run). The preflight's refusal, and the lease's (its first
    renewal comes before the preflight: runspec.watch.renew)."""
    assert spec.push is not None and spec.push.hub is not None
    repo = spec.push.hub.repo
    if spec.push.hub.reuse:
        return None
    taken = held_elsewhere(f"model repo {repo}", spec.name, lambda path: _small_file(repo, path))
    if taken is not None:
        return taken, REUSE_FIX
    earlier = _earlier(repo, paths)
    return (earlier, EARLIER_FIX) if earlier is not None else None


def _earlier(repo: str, paths: RunPaths) -> str | None:
    """Whether the repo holds an earlier run of this run's name (runspec.push.owner_check),
    this run as its record here says (none yet: not accepted). A damaged record says
    nothing of which run it is: then the first push finds out."""
    from runspec.store.state import DamagedRecord, RecordStore

    try:
        record = RecordStore(paths.state).load(paths.name)
    except DamagedRecord:
        return None
    ours = record.to_json() if record is not None else None
    return earlier_run(f"model repo {repo}", paths.name, ours, lambda path: _small_file(repo, path))


def _compare(entry: ManifestEntry, remote: object) -> str | None:
    from huggingface_hub.hf_api import RepoFile

    if not isinstance(remote, RepoFile):
        return f"{entry.path}: missing at the remote"
    if remote.size != entry.size:
        return f"{entry.path}: remote size {remote.size} != local {entry.size}"
    if remote.lfs is not None:
        if remote.lfs.sha256 != entry.sha256:
            return (
                f"{entry.path}: remote sha256 {remote.lfs.sha256[:12]} != local {entry.sha256[:12]}"
            )
        return None
    if entry.blob_id is None:
        return f"{entry.path}: stored as a plain blob; its blob id was not computed"
    if remote.blob_id != entry.blob_id:
        return f"{entry.path}: remote blob id {remote.blob_id[:12]} != local {entry.blob_id[:12]}"
    return None
