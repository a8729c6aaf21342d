"""The lease: `runspec/lease.json` in the run's Hub repo, a small file with commits of its own.

While a run lives, the box says until when it vouches for itself (`vouched_until`, two leases
ahead of each renewal, so one renewal lost to a slow Hub is no expiry), its state and epoch, the
newest checkpoint on its disk and the newest verified one, whether the final push verified, its
deadline (with the overrun) and where it runs (provider and instance id, never a key). A watcher
that ends the box writes `ended_by` before it calls the provider, through the Hub's optimistic
lock (`create_commit(parent_commit=...)`: a 412 when the branch moved), so two watchers end a
box once and a box that comes back reads who ended it.

Reads go through the one capped reader of Hub files (runspec.hubread: size, total time, strict
JSON) at one commit, and the fields are read strictly (runspec.watch.leasefields). A lease is
sealed with the run's key when the watch key is set (runspec.watch.seal); `proven` says whether
the one read was sealed for this repo with the reader's key.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from runspec.clock import parse_utc_iso
from runspec.hubreach import endpoint_set
from runspec.hubread import HostileFile, HubReadError, file_json
from runspec.hubread import head as hub_head
from runspec.push.base import http_status, one_line
from runspec.push.quota import hub_commit
from runspec.push.remote import LEASE
from runspec.watch.leasefields import LEASE_SCHEMA, DamagedLease, LeaseError, read_fields
from runspec.watch.seal import proves, seal, watch_key

if TYPE_CHECKING:
    from huggingface_hub import HfApi

log = logging.getLogger("runspec.watch")

LEASE_PATH = LEASE  # in the run's Hub repo, beside its record (runspec.push.remote)
VOUCH_LEASES = 2  # vouched_until is this many leases after a renewal
# A lease vouches at most this many leases past its renewal, whatever it says: an expiry in
# year 9999 cannot turn the watch off.
MAX_VOUCH_LEASES = VOUCH_LEASES + 1
READ_TIMEOUT_S = 30.0  # the total time one read of a lease (or the head) may take

__all__ = ["LEASE_SCHEMA", "DamagedLease", "HubLease", "Lease", "LeaseError", "LeaseMoved"]


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
    # The final push's weights, {path: {size, sha256}}: what a watcher reads back itself
    # before it destroys (a lease alone never turns a stop into a destroy).
    final_weights: dict[str, Any] | None = None
    seal: str | None = None  # runspec.watch.seal, over every other field and the repo id
    schema: int = LEASE_SCHEMA
    proven: bool = field(default=False, compare=False)  # as read: sealed for its repo

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["proven"]
        return out

    @property
    def final(self) -> bool:
        """The run reached its final state: nothing is left for a watcher to guard."""
        return self.state == "finished"

    @classmethod
    def from_json(cls, data: Any, proven: bool = False) -> Lease:
        """Raises DamagedLease for anything that is not a lease of this schema."""
        return cls(**read_fields(data), proven=proven)

    def sealed(self, key: bytes | None, repo: str) -> Lease:
        """This lease with its seal for `repo` (unsealed without a key)."""
        return replace(self, seal=seal(key, repo, self.to_json()) if key else None)

    @property
    def renewed_ts(self) -> float:
        return parse_utc_iso(self.renewed_at)

    @property
    def vouched_ts(self) -> float:
        """Until when it vouches, at most MAX_VOUCH_LEASES after its renewal."""
        cap = self.renewed_ts + MAX_VOUCH_LEASES * self.lease_s
        return min(parse_utc_iso(self.vouched_until), cap)

    @property
    def deadline_ts(self) -> float | None:
        return parse_utc_iso(self.deadline) if self.deadline else None


class HubLease:
    """One repo's lease: read at the head, written on top of the head it was read at."""

    def __init__(self, repo: str, api: HfApi | None = None) -> None:
        from huggingface_hub import HfApi

        self.repo = repo
        self.api = api or HfApi(endpoint=endpoint_set())
        self.key = watch_key()

    def head(self) -> str | None:
        """The main branch's commit; None when the repo does not exist (yet)."""
        try:
            return hub_head(self.repo, total_s=READ_TIMEOUT_S)
        except HostileFile as exc:
            raise DamagedLease(str(exc)) from exc
        except HubReadError as exc:
            raise LeaseError(str(exc)) from exc

    def read(self) -> tuple[str | None, Lease | None]:
        """(head commit, the lease at it); (None, None) for a missing repo, (head, None) for a
        repo without a lease. Raises LeaseError (unreadable) or DamagedLease."""
        sha = self.head()
        if sha is None:
            return None, None
        try:
            data = file_json(self.repo, LEASE_PATH, sha, total_s=READ_TIMEOUT_S)
        except HostileFile as exc:
            raise DamagedLease(str(exc)) from exc
        except HubReadError as exc:
            raise LeaseError(str(exc)) from exc
        if data is None:
            return sha, None
        try:
            lease = Lease.from_json(data)  # a dict of known, typed fields from here on
        except DamagedLease as exc:
            raise DamagedLease(f"{self.repo}: {exc}") from exc
        return sha, replace(lease, proven=proves(self.key, self.repo, data))

    def write(self, lease: Lease, parent: str | None, message: str) -> str:
        """Commit the lease on top of `parent` (None: wherever the head is); the new commit.
        Raises LeaseMoved when the branch moved since `parent`, LeaseError otherwise."""
        from huggingface_hub import CommitOperationAdd

        lease = lease.sealed(self.key, self.repo)
        body = json.dumps(lease.to_json(), indent=1, sort_keys=True).encode() + b"\n"
        op = CommitOperationAdd(path_in_repo=LEASE_PATH, path_or_fileobj=body)
        try:  # under the repo's commit quota with the pushes (runspec.push.quota)
            info = hub_commit(
                self.repo,
                lambda: self.api.create_commit(
                    self.repo,
                    operations=[op],
                    commit_message=message,
                    repo_type="model",
                    parent_commit=parent,
                ),
            )
        except Exception as exc:  # the lock's refusal is its own error; the rest unwritable
            if http_status(exc) == 412:
                raise LeaseMoved(f"{self.repo} moved since its lease was read") from exc
            raise LeaseError(f"cannot write {self.repo}'s lease: {one_line(exc)}") from exc
        return str(info.oid)
