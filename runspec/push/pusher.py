"""The run's pusher: when to push, one push at a time, and what counts as verified.

Triggers only set flags and wake the worker thread, so the lifecycle loop never waits on the
network: `notify_checkpoint()` after each epoch marker, `request_scheduled()` every `push.every` (a
job in the run's scheduler, runspec.timers, run by whoever drives the run: the daemon's loop or
`runspec run`'s ticker; never by the pusher), and
`push_now()` (the only blocking call, bounded by its timeout) for the final push and on interrupts.
Commits are at most one per `min_interval`, within the Hub's commit quota (runspec.push.quota);
pushes asked for meanwhile coalesce into one. A failed push is recorded as the run's `push_error`
and retried with backoff; training never waits for it.

Only a push whose every file was checked at the target counts as the run's `last_push`; the
manifest of that push is kept in `<job_dir>/pushed.json` so unchanged files are not sent again.
The pusher never writes the run's record itself: it tells the run's owner (runspec.store.owner).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from runspec.backoff import pause_after
from runspec.clock import SYSTEM, Clock, human_duration, parse_utc_iso, utc_iso
from runspec.meter import Meter
from runspec.push.base import PushFailed, PushTarget, StagedFile, one_line, scrub
from runspec.push.collect import Stager, is_immutable
from runspec.push.hubrecord import push_first_card, stage_record
from runspec.push.manifest import Manifest, ManifestEntry
from runspec.push.proven import proven
from runspec.push.pushline import pushed_line
from runspec.push.quota import hub_quota, within_quota
from runspec.push.remote import MANIFEST, RECORD
from runspec.push.sending import send
from runspec.push.targets import make_target
from runspec.requests import PushNow
from runspec.spec.model import Spec
from runspec.store.owner import RunOwner
from runspec.store.paths import RunPaths
from runspec.store.room import is_no_space
from runspec.store.state import PushRecord
from runspec.timers import Timers, push_every_id
from runspec.trainer.checkpoints import CheckpointFile
from runspec.units import format_bytes
from runspec.voice import warning

log = logging.getLogger("runspec.push")

WAIT_SLICE = 0.5  # the worker wakes at least this often (real seconds): a retry falls due
RATE_MIN_BYTES = 1 << 20  # smaller pushes say little about the link's speed


class Pusher:
    def __init__(
        self,
        spec: Spec,
        paths: RunPaths,
        owner: RunOwner,
        *,
        clock: Clock = SYSTEM,
        progress: Callable[[str], None] = print,
        min_interval: float = 60.0,
        retry_base: float = 30.0,
        retry_max: float = 900.0,
        target: PushTarget | None = None,
        eager: bool = False,
        timers: Timers,
    ) -> None:
        if spec.push is None:
            raise ValueError(f"run {spec.name} has no push section")
        self.spec = spec
        self.paths = paths
        self.owner = owner
        self.clock = clock
        self.progress = progress
        self.every = spec.push.every
        self.eager = eager  # every new complete checkpoint warrants a push
        self.min_interval = min_interval
        self.retry_base = retry_base
        self.retry_max = retry_max
        self.target = target or make_target(spec, paths)
        self.quota = hub_quota(self.target)  # the Hub's commit quota (runspec.push.quota)
        self.stager = Stager(spec, paths, clock)
        self.verified_file = paths.pushed_manifest
        self.verified = Manifest.load(self.verified_file)
        self.timers = timers  # the run's scheduler: its driver runs the due jobs
        self._job_id = push_every_id(spec.name)
        self._cond = threading.Condition()
        self._want_checkpoint = False
        self._want_scheduled = False
        self._now: list[PushNow] = []
        self._stopping = False
        self._last_commit: float | None = None  # monotonic
        self._last_verified: float | None = None  # monotonic
        self._noted_full = False  # the last failure was a full disk, said to the owner
        self._failures = 0
        self.last_failure: str | None = None  # the newest failed push's one line
        self.last_permanent = False  # ... and whether the target refused it for good
        self._retry_at: float | None = None  # monotonic
        self._sent_bytes = 0
        self._sent_seconds = 0.0
        self._thread: threading.Thread | None = None

    # --- the lifecycle's API --------------------------------------------------------------------
    def start(self) -> None:
        # On from the record's last verified push: a restart does not wait a whole interval.
        last = self.owner.record.last_push
        self._arm(parse_utc_iso(last.time) + self.every if last is not None else None)
        self._thread = threading.Thread(
            target=self._work, name=f"push-{self.spec.name}", daemon=True
        )
        self._thread.start()

    def _arm(self, first: float | None = None) -> None:
        """The push every `push.every`, the first at `first` (default: in one); none once
        stopping, though a push in flight at the stop ends after it."""
        with self._cond:
            if not self._stopping:
                self.timers.every(self._job_id, self.every, self.request_scheduled, first)

    def request_scheduled(self) -> None:
        """`push.every` passed with nothing verified meanwhile: push what changed."""
        with self._cond:
            self._want_scheduled = True
            self._cond.notify_all()

    def notify_checkpoint(self) -> None:
        """A new epoch marker appeared: push if a new complete checkpoint warrants it."""
        with self._cond:
            self._want_checkpoint = True
            self._cond.notify_all()

    def push_now(
        self, final: bool, timeout: float, give_up: Callable[[], bool] | None = None
    ) -> PushRecord | None:
        """Push at once (no minimum interval) and wait at most `timeout` seconds, or until
        `give_up()` (asked every WAIT_SLICE); the verified push, or None. A final push
        includes the run's logs and state."""
        request = PushNow(final=final)
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                return None
            self.last_failure, self.last_permanent = None, False  # this push's, from now
            self._now.append(request)
            self._cond.notify_all()
        # Real seconds, as the worker's network calls take them (whatever the clock seam says).
        end = time.monotonic() + timeout
        while not request.done.is_set() and (left := end - time.monotonic()) > 0:
            if give_up is not None and give_up():
                return None
            request.done.wait(min(left, WAIT_SLICE))
        return request.result

    def pending_bytes(self) -> int:
        """About how many bytes the next push would send (from file sizes; cheap)."""
        return self.stager.pending_bytes(self._verified_entries())

    def upload_rate(self) -> float | None:
        """Bytes per second measured on this run's uploads; None until there is a figure."""
        if self._sent_bytes < RATE_MIN_BYTES or self._sent_seconds <= 0:
            return None
        return self._sent_bytes / self._sent_seconds

    def stop(self, timeout: float = 10.0) -> None:
        """Stop triggering pushes; a push in flight gets `timeout` seconds to end."""
        with self._cond:
            self._stopping = True
            self.timers.cancel(self._job_id)
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    # --- the worker -----------------------------------------------------------------------------
    def _verified_entries(self) -> dict[str, ManifestEntry]:
        manifest = self.verified
        return manifest.by_path() if manifest is not None else {}

    def _next_kind(self) -> str | PushNow | None:
        """What the worker should do now (called with the lock held). A trigger that is due
        goes before a push_now asked after it, so push_now also waits for it."""
        if not self._stopping and (kind := self._due_trigger()) is not None:
            return kind
        if self._now:
            return self._now.pop(0)
        return "stop" if self._stopping else None

    def _due_trigger(self) -> str | None:
        now = self.clock.monotonic()
        interval_over = self._last_commit is None or now >= self._last_commit + self.min_interval
        interval_over = interval_over and (not self.quota or self.quota.wait(now, True) <= 0)
        if self._retry_at is not None:
            if now < self._retry_at or not interval_over:
                return None
            self._retry_at = None
            self._want_checkpoint = self._want_scheduled = False
            return "retry"
        if not (self._want_checkpoint or self._want_scheduled) or not interval_over:
            return None
        kind = "checkpoint" if self._want_checkpoint and not self._want_scheduled else "scheduled"
        self._want_checkpoint = self._want_scheduled = False
        return kind

    def _work(self) -> None:
        while True:
            with self._cond:
                while (job := self._next_kind()) is None:
                    self._cond.wait(WAIT_SLICE)
            if job == "stop":
                return
            try:
                if isinstance(job, PushNow):
                    # A final push always commits (it carries the run's record and log); an
                    # immediate one with nothing new is answered by the last verified push.
                    job.answer(self._attempt(job.final, always=job.final, answer_unchanged=True))
                else:
                    self._attempt(False, always=False, checkpoint_only=job == "checkpoint")
            except Exception:
                # Even recording a failure can fail (a full disk): log it, keep the worker.
                log.exception("%s: push worker error", self.spec.name)
            finally:
                if isinstance(job, PushNow):
                    job.done.set()

    def _attempt(
        self,
        final: bool,
        always: bool,
        checkpoint_only: bool = False,
        answer_unchanged: bool = False,
    ) -> PushRecord | None:
        """One push, its failure recorded and scheduled for retry; never raises. Returns the
        verified push; with nothing new to send, None (or, with `answer_unchanged`, the last
        verified push, which holds everything there is)."""
        try:
            pushed = self._push(final, always, checkpoint_only)
            if pushed is None and answer_unchanged:
                pushed = self.owner.record.last_push
        except Exception as exc:  # one failed push, whatever the cause, must not end the worker
            message = str(exc) if isinstance(exc, PushFailed) else one_line(exc)
            if not isinstance(exc, PushFailed):
                # The traceback's frames can quote a request's headers: scrubbed like the rest.
                log.debug("push failed:\n%s", scrub(traceback.format_exc()))
            permanent = isinstance(exc, PushFailed) and exc.permanent
            self._failed(message, permanent, say_retry=not answer_unchanged)
            return None
        return pushed

    def _failed(self, message: str, permanent: bool, say_retry: bool) -> None:
        """Record a failed push and schedule its retry. A push asked for now is retried by
        whoever asked (runspec.push.until), which says its own delay."""
        self._failures += 1
        self.last_failure, self.last_permanent = message, permanent
        # A refusal is not an outage: not tried again every minute, but at the longest pause.
        delay = (
            self.retry_max
            if permanent
            else pause_after(self._failures, self.retry_base, self.retry_max)
        )
        now = self.clock.monotonic()
        with self._cond:
            # The retry also waits out the Hub's commit quota (a 429's "retry in N minutes")
            # and the commit interval: the delay said is the real one.
            delay = max(delay, self.quota.wait(now, False) if self.quota else 0.0)
            self._retry_at = now + delay
            if self._last_commit is not None:
                delay = max(delay, self._last_commit + self.min_interval - now)
        log.debug("%s: %s (retry in %.0f s)", self.spec.name, message, delay)
        if say_retry:
            self.progress(warning(f"push failed, retrying in {human_duration(delay)}: {message}"))
        self.owner.push_failed(f"{utc_iso(self.clock.time())} {message}")

    def _warranted(self, complete: list[CheckpointFile]) -> bool:
        """After an epoch: a better best.pt, a new epoch_N.pt, or a new last.pt when nothing
        was pushed for `every`."""
        verified = self._verified_entries()
        due = (
            self._last_verified is None
            or self.clock.monotonic() - self._last_verified >= self.every
        )
        for item in complete:
            if not self.stager.fresh(item):
                continue
            name = Path(item.relpath).name
            if name == "best.pt" or (is_immutable(item.relpath) and item.relpath not in verified):
                return True
            if due or self.eager:
                return True
        return False

    def _push(self, final: bool, always: bool, checkpoint_only: bool) -> PushRecord | None:
        complete = self.stager.complete()
        if checkpoint_only and not self._warranted(complete):
            return None
        started = self.clock.monotonic()
        try:
            return self._stage_and_send(final, always, complete, started)
        except OSError as exc:
            if not is_no_space(exc):
                raise
            pending = self.stager.pending_bytes(self._verified_entries())
            what = (
                f"no space left in {self.stager.dir} to stage the files to push "
                f"(about {format_bytes(pending)} to stage)"
            )
            self.owner.note_disk_full(str(self.stager.dir), pending, what)
            self._noted_full = True
            raise PushFailed(f"push NOT possible: {what}") from exc

    def _stage_and_send(
        self, final: bool, always: bool, complete: list[CheckpointFile], started: float
    ) -> PushRecord | None:
        staged = self.stager.stage(final, complete)
        verified = self._verified_entries()
        uploads = [s for s in staged if verified.get(s.entry.path) != s.entry]
        if not uploads and not always:
            return None
        now = self.clock.time()
        manifest = Manifest.of(self.spec.name, verified, [s.entry for s in staged], now, final)
        epoch = manifest.epoch
        manifest_file = self.stager.add_manifest(
            json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n"
        )
        record_file = stage_record(self.stager, self.owner.record, manifest)
        uploads += [manifest_file, record_file]
        what = f"epoch {epoch}" if epoch is not None else "no epoch yet"
        message = f"runspec: {what}{' (final)' if final else ''}"

        sending = self.clock.monotonic()
        with self._cond:
            self._last_commit = sending
        size = sum(item.entry.size for item in uploads)
        meter = Meter(
            f"pushing {what}{' (final)' if final else ''}",
            size,
            self.progress,
            clock=self.clock,
            snapshot=self.paths.transfer_file,
        )
        commit = within_quota(
            self.quota, sending, lambda: send(self.target, uploads, message, meter)
        )
        sent = self.clock.monotonic() - sending
        ours = [manifest_file.entry, record_file.entry]
        manifest = proven(self, commit, manifest, ours, uploads, what)  # or raises PushFailed
        return self._verified_push(manifest, commit, uploads, started, sent)

    def _verified_push(
        self,
        manifest: Manifest,
        commit: str | None,
        uploads: list[StagedFile],
        started: float,
        sent: float,
    ) -> PushRecord:
        nbytes = sum(item.entry.size for item in uploads)
        seconds = self.clock.monotonic() - started
        first = self.verified is None  # the run's first verified push: a first card follows
        manifest.write(self.verified_file)
        self.verified = manifest
        self._sent_bytes += nbytes
        self._sent_seconds += sent
        self._failures = 0
        with self._cond:
            self._last_verified = self.clock.monotonic()
            self._want_scheduled = False
            self._retry_at = None
        self._arm()  # `every` counts from the last verified push, whatever caused it
        pushed = PushRecord(
            epoch=manifest.epoch,
            time=manifest.time,
            commit=commit,
            files=sorted([*manifest.by_path(), MANIFEST, RECORD]),  # every push holds both
            bytes=nbytes,
            seconds=round(seconds, 3),
            final=manifest.final,
        )
        self.owner.pushed(pushed)
        if self._noted_full:
            self._noted_full = False
            self.owner.clear_disk_full()
        self.stager.release(manifest.by_path())
        self.progress(pushed_line(pushed, manifest, uploads, self.target.description))
        # The repo's `runspec` tag (its card) from the first push on: a live run is findable on
        # the Hub. A final push gets its own card next; a folder gets its card at the end.
        if first and not manifest.final and self.target.key == "hub":
            push_first_card(self.spec, self.paths, self.owner.record, self.target, self.progress)
        return pushed
