"""The lease's first commit, into a repo that does not exist yet: the run is watched from its
first minute, not from its first push.

The repo is created as the spec says (`push.hub.private`, private unless it says otherwise),
with the lease and a stub card whose `runspec` tag lets `runspec watch ORG` find it before the
first push; the first push's card replaces the stub.
"""

from __future__ import annotations

import json

from runspec.hubreach import endpoint_set
from runspec.push.base import one_line
from runspec.watch.lease import LEASE_PATH, Lease, LeaseError

CARD_PATH = "README.md"


def stub_card(run: str) -> bytes:
    return (
        "---\ntags:\n- runspec\n---\n\n"
        f"# {run}\n\nTraining with runspec: its weights arrive with its first push, its "
        f"liveness is in `{LEASE_PATH}`.\n"
    ).encode()


def create_with_lease(repo: str, private: bool, lease: Lease, message: str) -> str:
    """Create `repo` and commit the lease and a stub card into it; the commit. A repo made
    meanwhile (another renewal, the first push) is written into only where it holds no card
    yet. Raises LeaseError."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=endpoint_set())
    body = json.dumps(lease.to_json(), indent=1, sort_keys=True).encode() + b"\n"
    ops = [CommitOperationAdd(path_in_repo=LEASE_PATH, path_or_fileobj=body)]
    try:
        api.create_repo(repo, repo_type="model", private=private, exist_ok=True)
        if not api.file_exists(repo, CARD_PATH, repo_type="model"):
            card = stub_card(lease.run)
            ops.append(CommitOperationAdd(path_in_repo=CARD_PATH, path_or_fileobj=card))
        info = api.create_commit(repo, operations=ops, commit_message=message, repo_type="model")
    except Exception as exc:  # any client or network fault: the next try makes it
        raise LeaseError(f"cannot create {repo} for its lease: {one_line(exc)}") from exc
    return str(info.oid)
