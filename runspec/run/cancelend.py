"""Whether a run's finish follows its final push: decided once, under the cancel gate.

`runspec cancel` after training (while the final push retries, say) turns the finish into
"keep" as long as the end is undecided; the move to `finishing` is the decision, taken under
`<job>/cancel.lock` after a last look for a cancel (runspec.store.cancelgate). A cancel that
comes later finds `finishing` and is refused by the command, saying what will happen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runspec.store.cancelgate import cancel_gate
from runspec.store.state import RunStatus, Termination

if TYPE_CHECKING:
    from runspec.run.lifecycle import Lifecycle

NO_FINISH = frozenset({Termination.CANCELLED, Termination.INTERRUPTED})
CANCELLED_LATE = "cancel requested after training: no finish action follows the push"


def decide_end(lc: Lifecycle) -> str | None:
    """After the final push: None when the finish follows (the run moved to `finishing`),
    else why no finish follows."""
    term = lc.record.termination or Termination.COMPLETED
    with cancel_gate(lc.paths):
        cancelled = lc.requests.poll_cancel(lc.paths, lc.say, CANCELLED_LATE)
        if term in NO_FINISH:
            return term.value
        if cancelled:
            return "cancelled"
        if not lc.options.owner.runspec or lc.requests.interrupted.is_set():
            return term.value
        lc.owner.transition(RunStatus.FINISHING, f"{term.value}; applying the finish action")
        return None


def cancelled_before_finish(lc: Lifecycle) -> bool:
    """At the finish's start: a cancel found here was promised before the end was decided
    (a move to `finishing` that could not be saved); once the finish has begun, the command
    refuses and writes none. True when the run was ended without its finish."""
    with cancel_gate(lc.paths):
        if lc.record.finish or not lc.paths.cancel_file.exists():
            return False
        lc.say(CANCELLED_LATE)
        lc.owner.transition(RunStatus.FINISHED, "cancelled; finish action not applied")
        return True
