"""The daemon follows repositories: each spec file that appears or changes on a followed branch
is validated and queued exactly once, and a spec deleted while its run is under way cancels it.

A spec is keyed by the repository, its path and its git blob sha. The ledger
(`<state>/follow/ledger.json`) records each key before the spec is dropped into the inbox
(`dropping`), then once it is there (`queued`), so a restart at any instant neither loses nor
repeats one: a `dropping` key is dropped again only when neither the inbox nor a run holds its
name. A spec reverted to an earlier blob is a new run only if that blob never ran (its key is
already in the ledger). Before a blob is queued it is claimed at the run's push target
(runspec.daemon.followclaim), so a second box following the same branch, or a daemon on a fresh
disk, never runs it again. A spec that fails validation is reported once, with `file:line:col`
(in the daemon's log, `runspec status` and the notification) and runs nothing.

A repository is read through git (runspec.daemon.gitmirror), or, named `hf://datasets/ORG/NAME`
(models/, spaces/), through the Hub's API with the box's Hub token (runspec.daemon.hubmirror),
keyed and claimed the same way. Reading one happens in a thread of its own, one at a time,
so a slow remote never holds the daemon's loop; what it decides is written into the inbox,
whose intake handles the rest as for `runspec submit` (the provenance travels in the sidecar).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from runspec.alerts import Alerts, Message
from runspec.clock import Clock, utc_iso
from runspec.daemon.followclaim import ClaimError, claim
from runspec.daemon.followledger import LEDGER_KEEP, prune
from runspec.daemon.followspec import FollowSpec
from runspec.daemon.gitmirror import BLOB_MODES, GitError, Mirror, hub_repo, shown_remote
from runspec.daemon.hubmirror import HubSource
from runspec.daemon.queue import request_cancel
from runspec.printable import printable
from runspec.spec.loader import check_spec_text
from runspec.spec.yamlload import MAX_BYTES, too_big
from runspec.store.atomic import write_bytes, write_json_atomic
from runspec.store.paths import StateLayout, provenance_sidecar
from runspec.store.state import RecordStore, RunStatus
from runspec.views.followview import read_status

log = logging.getLogger("runspec.follow")

SUFFIXES = (".yaml", ".yml")


class Follower:
    def __init__(
        self,
        follows: tuple[FollowSpec, ...],
        state: Path,
        inbox: Path,
        clock: Clock,
        say: Callable[[str], None],
        environ: dict[str, str] | None = None,
        notify: tuple[str, ...] = (),
    ) -> None:
        self.follows = follows
        # Where a person following the repository hears of a spec refused (the daemon's notify).
        self.alerts = Alerts(notify, say, environ=os.environ if environ is None else environ)
        self.state = state
        self.inbox = inbox
        self.clock = clock
        self.say = say
        self.environ = environ
        self.folder = StateLayout(state).follow
        self.ledger_file = self.folder / "ledger.json"
        self._busy = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.mirror: Mirror | HubSource | None = (
            None  # the one being read, so that close() can end its git
        )
        self.closing = False
        self.ledger = self._load_ledger()
        self.status = read_status(state)

    def _load_ledger(self) -> dict[str, Any]:
        try:
            loaded = json.loads(self.ledger_file.read_text())
        except FileNotFoundError:
            loaded = {}
        except (OSError, ValueError) as exc:
            # Never a fresh start over a damaged ledger: that could run every spec again.
            raise GitError(f"the follow ledger {self.ledger_file} cannot be read: {exc}") from exc
        loaded.setdefault("blobs", {})
        loaded.setdefault("present", {})
        return loaded

    def _save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_json_atomic(self.ledger_file, self.ledger)
        write_json_atomic(StateLayout(self.state).follow_status, self.status)

    # -- the timed job ------------------------------------------------------------------
    def start_poll(self, follow: FollowSpec) -> None:
        """Read `follow` in a thread of its own, unless a read is already under way."""
        self._threads = [t for t in self._threads if t.is_alive()]
        if any(t.is_alive() for t in self._threads):
            return
        thread = threading.Thread(target=self.poll, args=(follow,), name="runspec-follow")
        thread.daemon = True
        self._threads.append(thread)
        thread.start()

    def close(self) -> None:
        """Stop: a git still running for a read is ended (the next start reads again)."""
        self.closing = True
        if self.mirror is not None:
            self.mirror.kill()
        for thread in self._threads:
            thread.join(10.0)

    def poll(self, follow: FollowSpec) -> None:
        with self._busy:
            if self.closing:
                return
            try:
                self._poll(follow)
            except Exception as exc:  # a timed job logs its own errors: the daemon goes on
                log.exception("following %s", follow.shown)
                self._report(follow, error=str(exc))

    def _report(self, follow: FollowSpec, **fields: Any) -> None:
        before = self.status.get(follow.key, {})
        if "error" in fields and before.get("error") != fields["error"]:
            self.say(
                printable(
                    f"follow {follow.shown}: cannot read it: {fields['error']}; "
                    f"tried again every {follow.every:.0f} s"
                )
            )
        self.status[follow.key] = {
            "repo": shown_remote(follow.repo),
            "branch": follow.branch,
            "path": follow.path,
            "read_at": utc_iso(self.clock.time()),
            "rejected": before.get("rejected", {}),
            **{k: v for k, v in before.items() if k in ("commit",)},
            **fields,
        }
        self._save()

    def _poll(self, follow: FollowSpec) -> None:
        mirror: Mirror | HubSource
        if hub_repo(follow.repo) is not None:
            mirror = HubSource(follow.repo)
        else:
            mirror = Mirror(self.folder / f"{follow.key}.git", follow.repo, self.environ)
        self.mirror = mirror
        try:
            head = mirror.fetch(follow.branch)
            entries = mirror.specs(head, follow.path)
        except GitError as exc:
            self._report(follow, error=str(exc))
            return
        current: dict[str, str] = {}
        rejected: dict[str, str] = dict(self.status.get(follow.key, {}).get("rejected", {}))
        for entry in entries:
            parts = PurePosixPath(entry.path).parts
            if not entry.path.endswith(SUFFIXES) or any(p.startswith(".") for p in parts):
                continue
            if entry.mode not in BLOB_MODES:
                why = entry.refused or "a link or a submodule"
                rejected[entry.path] = printable(f"{entry.path}: {why}, never followed")
                continue
            current[entry.path] = entry.blob
            problem = self._take(follow, mirror, head, entry.path, entry.blob)
            if problem is not None:
                rejected[entry.path] = problem
            else:
                rejected.pop(entry.path, None)
        self._deleted(follow, head, current)
        self.ledger["present"][follow.key] = current
        prune(self.ledger["blobs"], f"{follow.repo}\0", set(current.items()), LEDGER_KEEP)
        listed = {entry.path for entry in entries}  # a refusal lasts while its file does
        rejected = {p: w for p, w in rejected.items() if p in current or p in listed}
        self._report(follow, commit=head, error=None, specs=len(current), rejected=rejected)

    def _blob_key(self, follow: FollowSpec, path: str, blob: str) -> str:
        return f"{follow.repo}\0{path}\0{blob}"

    def _take(
        self, follow: FollowSpec, mirror: Mirror | HubSource, head: str, path: str, blob: str
    ) -> str | None:
        """Validate and queue one blob, once; the first problem's line when it is refused."""
        key = self._blob_key(follow, path, blob)
        seen = self.ledger["blobs"].get(key)
        if seen is not None and seen["state"] not in ("claiming", "dropping"):
            return seen.get("problem")
        source = f"{shown_remote(follow.repo)}@{follow.branch}:{path}"
        size = mirror.size(blob)
        if size > MAX_BYTES:
            problems = [str(too_big(size, source))]
            spec = None
        else:
            spec, found = check_spec_text(mirror.read(blob), source, state=self.state)
            problems = [str(p) for p in found]
        if spec is None:
            for line in problems:
                self.say(f"follow: refused, nothing runs: {line}")
            said = "\n".join(problems[:20])
            self.alerts.send(Message("spec refused", f"runspec: {path} refused", said, "failure"))
            self.ledger["blobs"][key] = {
                "state": "rejected",
                "problem": problems[0],
                "at": utc_iso(self.clock.time()),
            }
            self._save()
            return problems[0]
        if seen is not None and seen["state"] == "dropping" and self._already_there(spec.name):
            seen["state"] = "queued"  # the drop before a restart had gone through
            self._save()
            return None
        target = self.inbox / f"{spec.name}.yaml"
        if target.exists():
            return None  # another of this name waits: read again at the next poll
        info = mirror.last_commit(head, path)
        body = {
            "repo": shown_remote(follow.repo),
            "path": path,
            "blob": blob,
            "commit": info.commit,
            "at": utc_iso(self.clock.time()),
        }
        # Known before the claim: a claim of this box's that the ledger does not know is a run
        # it forgot (a pruned entry, a fresh disk), never a claim to go on with.
        self.ledger["blobs"][key] = {"state": "claiming", "at": utc_iso(self.clock.time())}
        self._save()
        try:
            elsewhere = claim(spec, self.state, body, known=seen is not None)
        except ClaimError as exc:  # nothing queued; the next read tries again
            self.say(printable(f"follow: {spec.name} from {source} waits: {exc}"))
            return None
        if elsewhere is not None:
            self.ledger["blobs"][key] = {
                "state": "elsewhere",
                "name": spec.name,
                "why": elsewhere,
                "at": utc_iso(self.clock.time()),
            }
            self._save()
            self.say(printable(f"follow: not running {spec.name} from {source}: {elsewhere}"))
            return None
        self.ledger["blobs"][key] = {
            "state": "dropping",
            "name": spec.name,
            "commit": info.commit,
            "at": utc_iso(self.clock.time()),
            "claimed": spec.push is not None,  # a claim at the push target outlives the entry
        }
        self._save()
        provenance = {
            "via": "follow",
            "submitted_at": utc_iso(self.clock.time()),
            "sha256": spec.sha256,
            "git": {
                "remote": shown_remote(follow.repo),
                "branch": follow.branch,
                "commit": info.commit,
                "head": head,
                "path": path,
                "blob": blob,
                "author": info.author,
                "subject": info.subject,
                "committed_at": info.time,
                "dirty": False,
                "spec_modified": False,
            },
        }
        write_bytes(provenance_sidecar(self.inbox, target.name), json.dumps(provenance).encode())
        write_bytes(target, mirror.read(blob))
        self.ledger["blobs"][key]["state"] = "queued"
        self._save()
        self.say(
            printable(
                f"follow: queued {spec.name} from {source} at {info.commit[:12]} ({info.subject})"
            )
        )
        return None

    def _already_there(self, name: str) -> bool:
        record = RecordStore(self.state).load(name)
        return record is not None or (self.inbox / f"{name}.yaml").exists()

    def _deleted(self, follow: FollowSpec, head: str, current: dict[str, str]) -> None:
        """A spec gone from the branch while its run is under way: cancel that run (its newest
        checkpoint pushed, the machine kept)."""
        before = self.ledger["present"].get(follow.key, {})
        for path, blob in before.items():
            if path in current:
                continue
            seen = self.ledger["blobs"].get(self._blob_key(follow, path, blob), {})
            name = seen.get("name")
            if not name:
                continue
            record = RecordStore(self.state).load(name)
            if record is None or record.status is RunStatus.FINISHED:
                continue
            paths = StateLayout(self.state).run_paths(name)
            request_cancel(paths, self.clock, by=f"follow: {path} deleted at {head[:12]}")
            self.say(
                printable(
                    f"follow: {path} was deleted at {head[:12]}: cancelling {name} "
                    "(its newest checkpoint pushed, the machine kept)"
                )
            )
