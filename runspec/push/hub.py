"""The Hub target: a Hugging Face model repo, through huggingface_hub (no hand-written HTTP).

One `create_commit` per push; huggingface_hub does preupload, LFS (or, on the real Hub,
hf_xet) and its own retries of the uploads. Verification reads `get_paths_info` at the very
commit the push returned and compares each file's size and sha256 (LFS) or git blob id
(regular files) with the staged copy's.

Imported only when a Hub target is made, so the daemon pays for huggingface_hub only when a
run pushes to the Hub. The endpoint is read from HF_ENDPOINT when a push starts, not when
huggingface_hub was imported; the token is huggingface_hub's own choice (HF_TOKEN, else
the stored login) and never passes through runspec's hands.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import RepositoryNotFoundError
from huggingface_hub.hf_api import RepoFile

from runspec.model import HubTarget as HubSpec
from runspec.push.base import PushFailed, PushTarget, StagedFile, one_line
from runspec.push.manifest import ManifestEntry

PATHS_INFO_BATCH = 50

# httpcore's DEBUG trace logs raw response headers; a proxy that echoes the Authorization
# header would put the token into `runspec -v`'s log. Nothing runspec needs is logged there.
for _name in ("httpcore", "httpcore2"):
    if logging.getLogger(_name).level < logging.INFO:
        logging.getLogger(_name).setLevel(logging.INFO)


class HubTarget(PushTarget):
    def __init__(self, spec: HubSpec) -> None:
        self.repo = spec.repo
        self.private = spec.private
        self.description = f"hub {spec.repo}"

    def _api(self) -> HfApi:
        return HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)

    def _ensure_repo(self, api: HfApi) -> None:
        """Create the repo (private unless the spec says otherwise) when it is missing.

        Asked on every push: it is one cheap GET that the client does not retry, so an
        unreachable Hub fails the push at once instead of after the client's upload backoff.
        """
        try:
            api.repo_info(self.repo, repo_type="model")
        except RepositoryNotFoundError:
            api.create_repo(self.repo, repo_type="model", private=self.private, exist_ok=True)

    def push(self, uploads: Sequence[StagedFile], message: str) -> str | None:
        api = self._api()
        try:
            self._ensure_repo(api)
            operations = []
            for item in uploads:
                op = CommitOperationAdd(path_in_repo=item.entry.path, path_or_fileobj=item.local)
                # Hashed once already, on this very copy: spare the client a second pass.
                op.upload_info.sha256 = bytes.fromhex(item.entry.sha256)
                operations.append(op)
            info = api.create_commit(
                self.repo, operations=operations, commit_message=message, repo_type="model"
            )
        except Exception as exc:  # any client or network error fails this push only
            raise PushFailed(f"push to {self.description} failed: {one_line(exc)}") from exc
        return str(info.oid)

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
        return [p for e in expected if (p := _compare(e, remote.get(e.path)))]


def _compare(entry: ManifestEntry, remote: object) -> str | None:
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
