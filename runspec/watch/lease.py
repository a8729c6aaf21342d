"""The lease: `runspec/lease.json` in the run's Hub repo, a small file with commits of its own.

While a run lives, the box says until when it vouches for itself (`vouched_until`, two leases
ahead of each renewal, so one renewal lost to a slow Hub is no expiry), its state and epoch, the
newest checkpoint on its disk and the newest verified one, whether the final push verified, its
deadline (with the overrun) and where it runs (provider and instance id, never a key). A watcher
that ends the box writes `ended_by` before it calls the provider, through the Hub's optimistic
lock (`create_commit(parent_commit=...)`: a 412 when the branch moved), so two watchers end a
box once and a box that comes back reads who ended it.

Reads go through huggingface_hub's session at one commit (the head `repo_info` gave), capped in
size: a hostile repo cannot hand the watcher a huge file.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from runspec.clock import parse_utc_iso
from runspec.errors import RunspecError
from runspec.hubreach import endpoint_set
from runspec.push.base import one_line
from runspec.push.remote import LEASE

if TYPE_CHECKING:
    from huggingface_hub import HfApi

log = logging.getLogger("runspec.watch")

LEASE_PATH = LEASE  # in the run's Hub repo, beside its record (runspec.push.remote)
LEASE_SCHEMA = 1
VOUCH_LEASES = 2  # vouched_until is this many leases after a renewal
MAX_BYTES = 64 * 1024
READ_TIMEOUT_S = 30.0


class LeaseError(RunspecError):
    """The lease could not be read or written (the Hub's fault or the file's)."""


class DamagedLease(LeaseError):
    """The file is there but is no lease this runspec reads."""


class LeaseMoved(LeaseError):
    """The branch moved since the lease was read (HTTP 412): read it again."""


@dataclass(frozen=True)
class Lease:
    run: str
    vouched_until: str  # ISO UTC
    state: str  # the run's status (runspec.store.state.RunStatus)
    epoch: int
    renewed_at: str  # ISO UTC
    lease_s: float  # the renewal interval: a watcher's default grace
    newest_local: str | None = None  # the newest checkpoint on the box's disk
    newest_verified: str | None = None  # the newest one a verified push holds
    final_verified: bool = False  # the final push verified: the box holds nothing unverified
    deadline: str | None = None  # the run's deadline plus its overrun, ISO UTC
    provider: str | None = None
    instance: str | None = None
    region: str | None = None  # where the provider needs it to address the instance (AWS)
    timer: dict[str, Any] | None = None  # the provider's own timer, when one is armed
    ended_by: dict[str, Any] | None = None  # {"by", "reason", "action", "at", "confirmed"}
    schema: int = LEASE_SCHEMA

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def final(self) -> bool:
        """The run reached its final state: nothing is left for a watcher to guard."""
        return self.state == "finished"

    @classmethod
    def from_json(cls, data: Any) -> Lease:
        """Raises DamagedLease for anything that is not a lease of this schema."""
        if not isinstance(data, dict):
            raise DamagedLease("the lease is not a JSON object")
        if data.get("schema") != LEASE_SCHEMA:
            raise DamagedLease(f"lease schema {data.get('schema')!r}; this runspec reads 1")
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        checks: dict[str, tuple[type, ...]] = {
            "run": (str,), "vouched_until": (str,), "state": (str,), "renewed_at": (str,),
            "epoch": (int,), "lease_s": (int, float), "final_verified": (bool,),
        }  # fmt: skip
        for key, kinds in checks.items():
            if not isinstance(kwargs.get(key), kinds):
                raise DamagedLease(f"the lease's {key} is missing or not a {kinds[0].__name__}")
        for key in ("newest_local", "newest_verified", "deadline", "provider", "instance",
                    "region"):  # fmt: skip
            if kwargs.get(key) is not None and not isinstance(kwargs[key], str):
                raise DamagedLease(f"the lease's {key} is not a string")
        for key in ("timer", "ended_by"):
            if kwargs.get(key) is not None and not isinstance(kwargs[key], dict):
                raise DamagedLease(f"the lease's {key} is not an object")
        try:
            for key in ("vouched_until", "renewed_at", "deadline"):
                if kwargs.get(key):
                    parse_utc_iso(kwargs[key])
        except ValueError as exc:
            raise DamagedLease(f"the lease holds a time that is not ISO 8601: {exc}") from exc
        if kwargs["lease_s"] <= 0:
            raise DamagedLease("the lease's interval is not positive")
        return cls(**kwargs)

    @property
    def vouched_ts(self) -> float:
        return parse_utc_iso(self.vouched_until)

    @property
    def deadline_ts(self) -> float | None:
        return parse_utc_iso(self.deadline) if self.deadline else None


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


class HubLease:
    """One repo's lease: read at the head, written on top of the head it was read at."""

    def __init__(self, repo: str, api: HfApi | None = None) -> None:
        from huggingface_hub import HfApi

        self.repo = repo
        self.api = api or HfApi(endpoint=endpoint_set())

    def head(self) -> str | None:
        """The main branch's commit; None when the repo does not exist (yet)."""
        from huggingface_hub.errors import RepositoryNotFoundError

        try:
            info = self.api.repo_info(self.repo, repo_type="model")
        except RepositoryNotFoundError:
            return None
        except Exception as exc:  # any client or network fault: unreadable, said so
            raise LeaseError(f"cannot read {self.repo} on the Hub: {one_line(exc)}") from exc
        return str(info.sha) if info.sha else None

    def read(self) -> tuple[str | None, Lease | None]:
        """(head commit, the lease at it); (None, None) for a missing repo, (head, None) for a
        repo without a lease. Raises LeaseError (unreadable) or DamagedLease."""
        sha = self.head()
        if sha is None:
            return None, None
        data = self._file(sha)
        if data is None:
            return sha, None
        try:
            return sha, Lease.from_json(json.loads(data))
        except ValueError as exc:
            raise DamagedLease(f"{self.repo}: {LEASE_PATH} is not JSON: {exc}") from exc

    def _file(self, sha: str) -> bytes | None:
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers, get_session

        url = hf_hub_url(self.repo, LEASE_PATH, revision=sha, endpoint=endpoint_set())
        data = bytearray()
        try:
            with get_session().stream(
                "GET", url, headers=build_hf_headers(), follow_redirects=True,
                timeout=READ_TIMEOUT_S,
            ) as resp:  # fmt: skip
                if resp.status_code == 404:
                    return None
                if resp.status_code != 200:
                    raise LeaseError(f"{self.repo}: reading {LEASE_PATH} got {resp.status_code}")
                for chunk in resp.iter_bytes():
                    data += chunk
                    if len(data) > MAX_BYTES:
                        raise DamagedLease(f"{self.repo}: {LEASE_PATH} is over {MAX_BYTES} bytes")
        except LeaseError:
            raise
        except Exception as exc:  # the network's fault: unreadable
            raise LeaseError(f"cannot read {self.repo}'s lease: {one_line(exc)}") from exc
        return bytes(data)

    def write(self, lease: Lease, parent: str | None, message: str) -> str:
        """Commit the lease on top of `parent` (None: wherever the head is); the new commit.
        Raises LeaseMoved when the branch moved since `parent`, LeaseError otherwise."""
        from huggingface_hub import CommitOperationAdd

        body = json.dumps(lease.to_json(), indent=1, sort_keys=True).encode() + b"\n"
        op = CommitOperationAdd(path_in_repo=LEASE_PATH, path_or_fileobj=body)
        try:
            info = self.api.create_commit(
                self.repo, operations=[op], commit_message=message, repo_type="model",
                parent_commit=parent,
            )  # fmt: skip
        except Exception as exc:  # the lock's refusal is its own error; the rest unwritable
            if _status(exc) == 412:
                raise LeaseMoved(f"{self.repo} moved since its lease was read") from exc
            raise LeaseError(f"cannot write {self.repo}'s lease: {one_line(exc)}") from exc
        return str(info.oid)
