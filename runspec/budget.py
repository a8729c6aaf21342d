"""The deadline planner: does one more epoch still fit before the end must begin?

The run's deadline is fixed when the run starts (started_at + wall_clock, persisted as UTC in the
run record, so preflight and staging count and a restart keeps it). Inside a process the planner
anchors that deadline to the monotonic clock once, so a wall-clock jump (NTP on a fresh machine)
does not move it.

The reserve is what the end needs: the final push (bytes still to push over the upload rate
measured on this run, a cautious default before the first push) plus the finish action plus a
margin; or the spec's fixed `budget.reserve`. `deadline - reserve` is the point of no return: an
epoch still running then is interrupted. At each epoch end the planner predicts the next epoch
from the longest recent epoch of the same kind (validating epochs take longer), never the mean.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from runspec.clock import SYSTEM, Clock, parse_utc_iso
from runspec.spec.model import FinishAction, Spec
from runspec.store.state import RunRecord

DEFAULT_UPLOAD_RATE = 10e6  # bytes/s assumed before this run has measured a push
# Only to keep a stalled link from dividing by zero: a floor on the rate shortens the reserve,
# so it must sit far below any link worth pushing over.
MIN_UPLOAD_RATE = 1e3
PUSH_OVERHEAD_S = 5.0  # commit, verification and Hub round trips on top of the bytes
PUSH_SAFETY = 1.25  # the bytes' time is stretched by this: rates wobble
MARGIN_S = 10.0
MIN_RESERVE_S = 15.0
RECENT = 5  # epochs of each kind the prediction looks back over
# With no validating epoch seen yet, the next validating one is predicted as the longest
# non-validating one times this (validation on the val split, plus best.pt).
VALIDATION_FACTOR = 1.5

# Expected seconds from the verified push until the finish action has done its part.
FINISH_SECONDS: dict[FinishAction, float] = {
    FinishAction.NONE: 0.0,
    FinishAction.COMMAND: 15.0,
    FinishAction.POWEROFF: 10.0,
    FinishAction.STOP: 30.0,
    FinishAction.DESTROY: 30.0,
    FinishAction.AUTO: 30.0,
}


def deadline_of(record: RunRecord) -> float:
    """The run's persisted deadline (UTC); it never moves once the run has started."""
    if record.deadline is None:
        raise ValueError(f"run {record.name} has not started: no deadline yet")
    return parse_utc_iso(record.deadline)


def overrun_end(record: RunRecord, spec: Spec) -> float:
    """The run's deadline plus its `budget.overrun` (UTC): the last moment its budget pays for.

    The final push's window, the lease's deadline, the end's retries, the failsafe and the
    provider's timer all count from here (the last two with a grace of their own after it).
    """
    return deadline_of(record) + spec.budget.overrun


def eval_interval_of(spec: Spec) -> int:
    """LibreYOLO's `eval_interval` for this spec (`val: false` turns validation off: 0)."""
    return eval_interval_from_args(spec.train.args)


def eval_interval_from_args(args: Mapping[str, object]) -> int:
    """The same from `train.args` alone, as the trainer has them.

    10 is the `libreyolo train` default (and TrainConfig's for the detection families).
    """
    if args.get("val") in (False, "false", "False", 0):
        return 0
    value = args.get("eval_interval", 10)
    return int(value) if isinstance(value, int | float | str) else 10


def validates(epoch: int, total_epochs: int, eval_interval: int) -> bool:
    """Whether LibreYOLO validates after `epoch` (1-based), as its trainer decides.

    libreyolo/training/trainer.py `_should_validate_epoch` (0-based e): off when
    eval_interval <= 0, else `(e + 1) % eval_interval == 0` or the final epoch.
    """
    if eval_interval <= 0:
        return False
    return epoch % eval_interval == 0 or epoch >= total_epochs


def last_epoch_in_budget(
    stop_at: float,
    ended_at: float,
    epoch: int,
    total_epochs: int,
    eval_interval: int,
    predict: Callable[[bool], float | None],
) -> int | None:
    """The epoch the budget stops training after: going on from `epoch` (ended at `ended_at`),
    each next epoch as long as `predict(validating)` says, the trainer's own rule at each
    boundary (runspec.trainer: no epoch that would end past `stop_at`). None while no epoch
    was measured."""
    at, done = ended_at, epoch
    while done < total_epochs:
        guess = predict(validates(done + 1, total_epochs, eval_interval))
        if guess is None:
            return None
        if at + guess > stop_at:
            break
        at, done = at + guess, done + 1
    return done


def auto_reserve(
    pending_bytes: int, upload_rate: float, finish_seconds: float, margin: float = MARGIN_S
) -> float:
    """The end's needs when the spec fixes no `budget.reserve`: the final push of
    `pending_bytes` at `upload_rate` (stretched, plus its round trips), the finish, a margin."""
    rate = max(upload_rate, MIN_UPLOAD_RATE)
    push = PUSH_OVERHEAD_S + PUSH_SAFETY * max(0, pending_bytes) / rate
    return max(MIN_RESERVE_S, push + finish_seconds + margin)


@dataclass(frozen=True)
class EpochDecision:
    fits: bool
    now: float  # wall time of the decision
    predicted_epoch_s: float | None
    reserve_s: float
    point_of_no_return: float  # wall time
    reason: str


class Planner:
    def __init__(
        self,
        deadline: float,
        fixed_reserve: float | None,
        clock: Clock = SYSTEM,
        *,
        finish_seconds: float = FINISH_SECONDS[FinishAction.AUTO],
        margin: float = MARGIN_S,
        default_rate: float = DEFAULT_UPLOAD_RATE,
    ) -> None:
        self.deadline = deadline
        self.fixed_reserve = fixed_reserve
        self.clock = clock
        self.finish_seconds = finish_seconds
        self.margin = margin
        self.default_rate = default_rate
        # The deadline on the monotonic clock, anchored once.
        self._mono_deadline = clock.monotonic() + (deadline - clock.time())
        self._epochs: dict[int, tuple[float, bool]] = {}
        self._last_reserve: float | None = None

    @classmethod
    def for_spec(cls, spec: Spec, record: RunRecord, clock: Clock = SYSTEM) -> Planner:
        """The planner of a started run (after a restart too: the deadline is the record's)."""
        return cls(
            deadline_of(record),
            spec.budget.reserve,
            clock,
            finish_seconds=FINISH_SECONDS[spec.finish.action],
        )

    # What happened.
    def record_epoch(self, epoch: int, seconds: float, validated: bool) -> None:
        """An epoch's length; a resumed run repeating an epoch number replaces it."""
        self._epochs[epoch] = (max(0.0, seconds), validated)

    # Time.
    def remaining(self) -> float:
        """Seconds until the deadline (negative once past)."""
        return self._mono_deadline - self.clock.monotonic()

    def _wall(self, mono: float) -> float:
        return self.clock.time() + (mono - self.clock.monotonic())

    # The end's needs.
    def reserve(self, pending_bytes: int, upload_rate: float | None = None) -> float:
        """Seconds to keep free before the deadline for the final push and the finish."""
        if self.fixed_reserve is not None:
            reserve = self.fixed_reserve
        else:
            # The pusher measures the link (runspec.push.pusher.Pusher.upload_rate).
            rate = upload_rate or self.default_rate
            reserve = auto_reserve(pending_bytes, rate, self.finish_seconds, self.margin)
        self._last_reserve = reserve
        return reserve

    def point_of_no_return(
        self, pending_bytes: int | None = None, upload_rate: float | None = None
    ) -> float:
        """Wall time after which an epoch still running is interrupted."""
        if pending_bytes is None:
            reserve = self._last_reserve if self._last_reserve is not None else self.reserve(0)
        else:
            reserve = self.reserve(pending_bytes, upload_rate)
        return self._wall(self._mono_deadline - reserve)

    def stop_at(self) -> float:
        """The wall time training must be over by (the trainer's control-folder deadline).

        The trainer does not start an epoch that its longest epoch so far would carry past this
        time; the lifecycle rewrites it whenever the reserve changes (after each push).
        """
        return self.point_of_no_return()

    # The prediction.
    def predict_epoch(self, next_validates: bool) -> float | None:
        """The next epoch's length: the longest of the last few of its kind; None if unknown."""
        ordered = [self._epochs[e] for e in sorted(self._epochs)]
        same = [s for s, v in ordered if v == next_validates][-RECENT:]
        if same:
            return max(same)
        if not ordered:
            return None
        longest = max(s for s, _ in ordered[-RECENT:])
        # Only the other kind seen: a validating epoch is longer than a plain one; a plain one
        # is at most as long as a validating one.
        return longest * VALIDATION_FACTOR if next_validates else longest

    def cuts_at(self, ended_at: float, epoch: int, total: int, eval_interval: int) -> int | None:
        """The epoch the budget will stop training after, when that is before the last."""
        last = last_epoch_in_budget(
            self.stop_at(), ended_at, epoch, total, eval_interval, self.predict_epoch
        )
        return last if last is not None and last < total else None

    def guesses(self) -> dict[str, float]:
        """The next epoch's predicted length by kind (`validating`, `plain`), where known."""
        kinds = {"validating": self.predict_epoch(True), "plain": self.predict_epoch(False)}
        return {kind: guess for kind, guess in kinds.items() if guess is not None}

    def fits_another_epoch(
        self, next_validates: bool, pending_bytes: int, upload_rate: float | None = None
    ) -> bool:
        return self.decide(next_validates, pending_bytes, upload_rate).fits

    def decide(
        self, next_validates: bool, pending_bytes: int, upload_rate: float | None = None
    ) -> EpochDecision:
        reserve = self.reserve(pending_bytes, upload_rate)
        left = self.remaining() - reserve  # seconds until the point of no return
        predicted = self.predict_epoch(next_validates)
        now = self.clock.time()
        pnr = now + left
        if left <= 0:
            return EpochDecision(False, now, predicted, reserve, pnr, "past the point of no return")
        if predicted is None:
            return EpochDecision(True, now, None, reserve, pnr, "no epoch measured yet")
        kind = "validating" if next_validates else "training-only"
        fits = predicted <= left
        verb = "fits" if fits else "does not fit"
        reason = (
            f"next {kind} epoch (~{predicted:.1f} s) {verb} in the {left:.1f} s before the "
            f"reserve ({reserve:.1f} s)"
        )
        return EpochDecision(fits, now, predicted, reserve, pnr, reason)
