"""The trainer's epoch markers and result when the control folder refuses writes: a state
folder made read-only mid-run (issue 19). Training goes on; the newest marker is kept in memory
and written, with the result, as soon as the folder takes them."""

from __future__ import annotations

import sys
from pathlib import Path

from runspec.clock import SYSTEM
from runspec.store.room import is_unwritable
from runspec.trainer import control
from runspec.trainer.control import EpochMarker, TrainerResult

READ_ONLY_POLL_S = 5.0
# Markers a read-only control folder (the state folder made read-only) refused, by folder:
# training goes on, and the newest is written with the result once the folder takes it.
_UNWRITTEN: dict[Path, EpochMarker] = {}


def mark(ctl: Path, marker: EpochMarker) -> None:
    try:
        control.write_epoch_marker(ctl, marker)
    except OSError as exc:
        if not is_unwritable(exc):
            raise
        if ctl not in _UNWRITTEN:
            print(
                f"runspec.trainer: cannot write the epoch marker ({exc}); training goes on",
                file=sys.stderr,
                flush=True,
            )
        _UNWRITTEN[ctl] = marker
    else:
        _UNWRITTEN.pop(ctl, None)


def newest_marker(ctl: Path) -> EpochMarker | None:
    return _UNWRITTEN.get(ctl) or control.read_epoch_marker(ctl)


def report(ctl: Path, result: TrainerResult) -> None:
    """The result, and a marker the folder refused, once the control folder takes them: a
    read-only state folder is waited out (the supervisor's deadline stop ends the wait)."""
    while True:
        try:
            marker = _UNWRITTEN.get(ctl)
            if marker is not None:
                control.write_epoch_marker(ctl, marker)
                del _UNWRITTEN[ctl]
            control.write_result(ctl, result)
            return
        except OSError as exc:
            if not is_unwritable(exc):
                raise
            SYSTEM.sleep(READ_ONLY_POLL_S)
