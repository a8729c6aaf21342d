"""The box's side of the lease: written at the run's start (the repo made for it, private as the
spec says), renewed every `watch.lease` while the run lives, and the final state written at its
end. A renewal that fails is tried again with backoff, a 429's or 503's Retry-After honoured,
for most of a lease: vouched_until is two leases ahead, so a Hub that fails a share of its
requests costs retries, not the lease.

A renewal reads the lease at the head first and commits on top of that head: when a watcher
ended this box (`ended_by`), the box says so once and never renews over it, so a stopped box
that comes back does not fight the watcher. Every renewal is one small commit: at the default
5m, 12 commits an hour per run (`bench/bench_watch.py` measures it).

Renewals run in a thread of their own (no loop touches the network): `kick()` starts one unless
one is still under way, and a slow Hub costs a renewal, never the run. `kick()` is a timed job of
the run's scheduler (runspec.timers), every lease on a fixed beat, armed by the run's driver
(runspec.run.driver): the daemon's loop or `runspec run`'s ticker runs it; the renewer keeps
no timing of its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from runspec.backoff import pause_after
from runspec.budget import overrun_end
from runspec.clock import SYSTEM, Clock, utc_iso
from runspec.machineowner import RUNSPEC, MachineOwner
from runspec.providers.aws import AWS
from runspec.providers.awstimer import MARGIN_S, arm_stop_timer, disarm_timer
from runspec.providers.base import Provider, ProviderError
from runspec.push.hub import not_this_runs
from runspec.spec.model import Spec
from runspec.store.atomic import write_json_atomic
from runspec.store.paths import RunPaths
from runspec.store.state import RecordStore, RunRecord
from runspec.trainer.checkpoints import epoch_number
from runspec.voice import warning
from runspec.watch.hubclock import refused, retry_after
from runspec.watch.lease import VOUCH_LEASES, HubLease, Lease, LeaseError
from runspec.watch.renewhub import create_with_lease
from runspec.watch.weightsread import final_weights

log = logging.getLogger("runspec.watch")

FINAL_WAIT_S = 15.0  # the longest the final state's write (and one under way) is waited for
RETRY_SHARE = 0.9  # of a lease: how long a renewal is tried before the next one is due
FIRST_LEASE_WAIT_S = 60.0  # `runspec run` waits this long (at most a lease) for the first lease
FIRST_PAUSE_S = 1.0  # the first pause between tries, doubling up to a quarter of the lease


def newest_pushed(names: list[str]) -> str | None:
    """The newest checkpoint among a verified push's files, by name (the record keeps no
    epoch per file): last.pt, rewritten every epoch, else the highest epoch_N.pt, else
    best.pt. epoch_N.pt is written only every save_period epochs: with save_period 10 at
    epoch 15, epoch_10.pt is five epochs older than last.pt."""
    plain = [Path(n).name for n in names if n.endswith(".pt")]
    if "last.pt" in plain:
        return "last.pt"
    epochs = [(number, n) for n in plain if (number := epoch_number(n)) is not None]
    if epochs:
        return max(epochs)[1]
    return "best.pt" if "best.pt" in plain else None


def newest_on_disk(weights: Path) -> str | None:
    """The checkpoint of the run folder written last, whatever its name."""
    found: list[tuple[float, str]] = []
    for path in weights.glob("*.pt") if weights.is_dir() else []:
        try:
            found.append((path.stat().st_mtime, path.name))
        except OSError:  # removed meanwhile (LibreYOLO rewrites by replacing)
            continue
    return max(found)[1] if found else None


Where = tuple[Provider | None, str | None, str | None, str | None]
NOWHERE: Where = (None, None, None, None)


def where_it_runs(spec: Spec) -> Where:
    """This box's provider adapter as the finish would address it, with its name, instance
    and (AWS) region; NOWHERE when it cannot tell (the watcher then notifies instead of
    acting). Every provider call is inside: a metadata hiccup costs the lease its instance,
    never the renewals."""
    from runspec.providers.detect import get_provider  # noqa: PLC0415 - a dozen modules, once

    try:
        provider, _how = get_provider(spec.finish.provider, timeout=5.0)
        instance = provider.identify()
        region = provider.region() if isinstance(provider, AWS) else None
    except ProviderError as exc:
        log.info("the lease names no instance: %s", exc)
        return NOWHERE
    return provider, provider.name, instance, region


class LeaseRenewer:
    def __init__(
        self,
        spec: Spec,
        paths: RunPaths,
        store: RecordStore,
        *,
        clock: Clock = SYSTEM,
        say: Callable[[str], None] = print,
        owner: MachineOwner = RUNSPEC,
        on_ended: Callable[[], None] | None = None,
    ) -> None:
        assert spec.push is not None and spec.push.hub is not None and spec.watch.lease
        # Under an engine (SkyPilot, dstack, HF Jobs) the machine is the engine's: the lease
        # names no provider or instance (a watcher then only notifies) and arms no timer.
        self.owner = owner
        # Told once when a watcher ended this box: the run then pushes what it can and stops.
        self.on_ended = on_ended
        self.spec = spec
        self.paths = paths
        self.store = store
        self.clock = clock
        self.say = say
        self.interval: float = spec.watch.lease
        self._provider: Provider | None = None
        self.repo = spec.push.hub.repo
        self._hub: HubLease | None = None
        self.ended_by: dict[str, object] | None = None
        self.renewals = 0
        self._where: tuple[str | None, str | None, str | None] | None = None
        self.timer: dict[str, object] | None = None  # the provider's own timer, once armed
        self._timer_tried = False
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one renewal at a time, the final one included
        self.landed = threading.Event()  # a renewal landed (the first one: the run is watched)
        self.tried = threading.Event()  # the first try is over, landed or not
        self.last_error = ""
        self.private = spec.push.hub.private
        self._said_taken = False
        # Asked once, before the first lease goes into a repo that exists: whether this run
        # may write there at all (runspec.push.hub.not_this_runs). A refused run's lease
        # would be a commit in another run's repo, made before its preflight refuses it.
        self.checked = False
        self.refused: str | None = None

    @property
    def hub(self) -> HubLease:
        """Made at the first renewal: huggingface_hub is imported then, in the renewal's
        thread, never at the run's start."""
        if self._hub is None:
            self._hub = HubLease(self.repo)
        return self._hub

    def build(self, record: RunRecord) -> Lease:
        if self._where is None:
            found = where_it_runs(self.spec) if self.owner.runspec else NOWHERE
            self._provider, self._where = found[0], found[1:]
        provider, instance, region = self._where
        self._arm_timer(record)
        now = self.clock.time()
        push = record.last_push
        deadline = None
        if record.deadline:
            deadline = utc_iso(overrun_end(record, self.spec))
        return Lease(
            run=self.spec.name,
            vouched_until=utc_iso(now + VOUCH_LEASES * self.interval),
            state=record.status.value,
            epoch=record.epoch,
            renewed_at=utc_iso(now),
            lease_s=self.interval,
            newest_local=newest_on_disk(self.paths.run_dir / "weights"),
            newest_verified=newest_pushed(push.files) if push else None,
            final_verified=bool(push and push.final),
            final_weights=final_weights(self.paths.pushed_manifest)
            if push and push.final
            else None,
            deadline=deadline,
            provider=provider,
            instance=instance,
            region=region,
            timer=self.timer,
        )

    def _arm_timer(self, record: RunRecord) -> None:
        """AWS's own timer at the deadline plus overrun plus a margin, tried once per run."""
        aws, instance = self._provider, self._where[1] if self._where else None
        if self._timer_tried or not isinstance(aws, AWS) or not record.deadline or not instance:
            return
        self._timer_tried = True
        at = overrun_end(record, self.spec) + MARGIN_S
        try:
            self.timer = arm_stop_timer(aws, self.spec.name, instance, at)
        except ProviderError as exc:  # the watcher stays the guard; said, never fatal
            self.say(warning(f"{self.spec.name}: no provider timer: {exc}"))
            return
        self.say(f"{self.spec.name}: provider timer: aws stops {instance} at {self.timer['at']}")

    def renew(self, patience: float | None = None, final: bool = False) -> bool:
        """One renewal from the record on disk, tried again with backoff (a 429's or 503's
        Retry-After honoured) until it lands, a watcher's end is read, or `patience` has
        passed (by default most of a lease: the next renewal is due then, and vouched_until,
        two leases ahead, still holds); whether a lease was written."""
        with self._lock:
            wait = self.clock.sleep if final else self._stop.wait
            budget = RETRY_SHARE * self.interval if patience is None else patience
            until = self.clock.monotonic() + budget
            failures = 0
            while True:
                landed, asked = self._attempt()
                self.tried.set()
                if landed is not None:
                    return landed
                failures += 1
                most = max(self.interval / 4, FIRST_PAUSE_S)
                pause = max(pause_after(failures, FIRST_PAUSE_S, most), asked or 0.0)
                if self.clock.monotonic() + pause > until or (self._stop.is_set() and not final):
                    name, error = self.spec.name, self.last_error
                    log.warning(
                        "%s: the lease was not renewed (%d tries): %s", name, failures, error
                    )
                    return False
                if wait(pause) is True:  # the run ended meanwhile: the final renewal takes over
                    return False

    def _attempt(self) -> tuple[bool | None, float | None]:
        """(True: written, False: not to be tried again, None: failed; the pause the Hub
        asked for)."""
        if self.ended_by is not None or self.refused is not None:
            return False, None
        record = self.store.load(self.spec.name)
        if record is None:
            return False, None
        lease = self.build(record)  # arms the provider's timer too, repo or not
        message = f"runspec: lease of {self.spec.name} ({lease.state})"
        try:
            head, current = self.hub.read()
            # Only a watcher holding the watch key can end this box (a proven lease).
            if current is not None and current.ended_by is not None and current.proven:
                self._keep(current.to_json())
                self._ended(current.ended_by)
                return False, None
            if current is not None and current.run != self.spec.name and not current.final:
                self._taken(current.run)
                return False, None
            if head is not None and not self._may_write():
                return False, None
            if head is None:  # the first minute: the repo, private as the spec says
                sealed = lease.sealed(self.hub.key, self.repo)  # the watch key binds it too
                create_with_lease(self.repo, self.private, sealed, message)
            else:
                self.hub.write(lease, head, message)
            self._keep(lease.to_json())
        except LeaseError as exc:  # a moved branch or a flaky Hub: tried again
            log.info("%s: a try of the lease failed: %s", self.spec.name, exc)
            self.last_error = str(exc)
            if refused(exc):  # the token is refused: trying again changes nothing
                log.warning("%s: the lease was not renewed: %s", self.spec.name, exc)
                return False, None
            return None, retry_after(exc)
        self.renewals += 1
        self.landed.set()
        return True, None

    def _may_write(self) -> bool:
        """Whether this run may write its lease into its repo, which exists: asked of the
        repo once (the record and manifest there), never again once a lease of it landed."""
        if self.checked or self.renewals:
            return True
        refused = not_this_runs(self.spec, self.paths)
        self.checked = True
        if refused is not None:
            self.refused = refused[0]
            self.say(warning(f"{self.spec.name}: no lease written to {self.repo}: {refused[0]}"))
            return False
        return True

    def _taken(self, other: str) -> None:
        if not self._said_taken:
            self._said_taken = True
            said = f"{self.repo} holds the live lease of run {other!r}: not written over it"
            self.say(warning(f"{self.spec.name}: {said}"))

    def _final(self) -> None:
        # The final state, tried again on a slow or refusing Hub: a lease left "training"
        # expires, and a watcher would stop this box while it drives the next run.
        try:
            self.renew(patience=FINAL_WAIT_S - 3.0, final=True)
        except Exception:
            log.exception("%s: the final lease was not written", self.spec.name)
        timer = self.timer
        record = self.store.load(self.spec.name)
        if timer is None or record is None or not record.ended_at:
            return
        # A fresh adapter: the first one's metadata token and role credentials have expired
        # since, and a timer left armed would stop a box kept on purpose.
        aws = where_it_runs(self.spec)[0]
        if not isinstance(aws, AWS):
            self.say(warning(f"{self.spec.name}: the provider timer is still armed"))
            return
        try:  # the run ended: whatever its finish did, the box is no longer AWS's to stop
            disarm_timer(aws, str(timer["name"]))
        except ProviderError as exc:
            self.say(warning(f"{self.spec.name}: the provider timer is still armed: {exc}"))
            return
        self.say(f"{self.spec.name}: provider timer removed ({timer['name']})")

    def _keep(self, lease: dict[str, object]) -> None:
        """The lease as the Hub has it, beside the record, so `runspec status` shows it."""
        try:
            write_json_atomic(self.paths.lease_file, lease)
        except OSError as exc:  # a full disk costs the status line, never the renewal
            log.warning("%s: cannot keep the lease's copy: %s", self.spec.name, exc)

    def _ended(self, ended_by: dict[str, object]) -> None:
        self.ended_by = ended_by
        self.say(
            warning(
                f"{self.spec.name}: this box was ended by {ended_by.get('by')} "
                f"({ended_by.get('reason')}, {ended_by.get('action')} at {ended_by.get('at')}); "
                "the lease is not renewed over it; the run pushes what it can and stops"
            )
        )
        if self.on_ended is not None:
            self.on_ended()

    def kick(self) -> None:
        """A renewal in a thread of its own, unless one is still under way."""
        if self._stop.is_set() or (self._thread is not None and self._thread.is_alive()):
            return  # finished (the final state is written), or a renewal is under way
        self._thread = threading.Thread(target=self._renew_safely, name="lease", daemon=True)
        self._thread.start()

    def first(self, timeout: float) -> bool:
        """Wait (at most `timeout`) for the first try of the first renewal; whether the lease
        landed. A Hub that refuses it does not hold up the run: the tries go on beside it."""
        self.tried.wait(timeout)
        return self.landed.is_set()

    def _renew_safely(self) -> bool:
        """A renewal whose failure, whatever it is, costs that renewal only: a thread that
        died here would let the lease expire and a watcher stop a healthy box."""
        try:
            return self.renew()
        except Exception:
            log.exception("%s: the lease was not renewed", self.spec.name)
            return False

    def finish(self) -> None:
        """Stop renewing and write the final state, waiting a bounded time: a Hub that hangs
        or refuses must not hold up the end of `runspec run` (the lease then expires, and a
        watcher finds the state of the last renewal)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=FINAL_WAIT_S)
        final = threading.Thread(target=self._final, name="lease-final", daemon=True)
        final.start()
        final.join(timeout=FINAL_WAIT_S)


def renewer_for(
    spec: Spec,
    paths: RunPaths,
    store: RecordStore,
    *,
    clock: Clock = SYSTEM,
    say: Callable[[str], None] = print,
    owner: MachineOwner = RUNSPEC,
    on_ended: Callable[[], None] | None = None,
) -> LeaseRenewer | None:
    """The run's renewer, or None when its spec has no lease (or the watcher is off here)."""
    if spec.watch.lease is None:
        return None
    return LeaseRenewer(spec, paths, store, clock=clock, say=say, owner=owner, on_ended=on_ended)
