"""A box's own end, confirmed by the watcher: the box asked its provider to stop or destroy
itself and may not have lived to push the confirmation (runspec.push.endconfirm). On a pass
over a finished run whose receipt names such a finish (or auto, which chose one) and no
`runspec/end.json` stands beside it, the watcher reads the instance's state once; gone, or in
a state that shows the finish took effect, and it adds the confirmation (`by: watch`). Nothing
is ever asked of the provider here but a read, and a run with its confirmation, or a receipt
with no end of the machine in it, costs two small reads of the Hub and no provider call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from runspec.clock import Clock
from runspec.hubread import HubReadError, file_json
from runspec.providers.base import GONE, Action, Provider, ProviderError
from runspec.push.remote import END, RECEIPT
from runspec.watch.endedby import confirm_end
from runspec.watch.lease import HubLease, Lease

log = logging.getLogger("runspec.watch")

READ_S = 30.0
# The receipt's finish action, and the ends that show it took effect (auto: whichever it chose).
ENDS = {
    "stop": (Action.STOP,),
    "destroy": (Action.DESTROY,),
    "auto": (Action.STOP, Action.DESTROY),
}


def see_end(
    hub: HubLease, head: str, lease: Lease, provider: Callable[[], Provider], clock: Clock
) -> bool:
    """Whether this pass confirmed the finished run's own end (and added end.json)."""
    try:
        receipt = file_json(hub.repo, RECEIPT, head, total_s=READ_S)
        if receipt is None or file_json(hub.repo, END, head, total_s=READ_S) is not None:
            return False
    except HubReadError as exc:  # the next pass reads again
        log.info("%s: the receipt or the end could not be read: %s", hub.repo, exc)
        return False
    finish = receipt.get("finish") if isinstance(receipt, dict) else None
    action = finish.get("action") if isinstance(finish, dict) else None
    if action not in ENDS or not isinstance(finish, dict):
        return False
    if (finish.get("provider"), finish.get("instance")) != (lease.provider, lease.instance):
        return False  # never the receipt's word for which instance: the sealed lease's only
    try:
        adapter = provider()
        state = adapter.state(adapter.identify())
    except ProviderError as exc:
        log.info("%s: the instance's state could not be read: %s", hub.repo, exc)
        return False
    if state != GONE and not any(state in adapter.going(a) for a in ENDS[action]):
        return False
    return confirm_end(
        hub, lease, action, f"seen {state} after the box's own {action}", clock.time()
    )
