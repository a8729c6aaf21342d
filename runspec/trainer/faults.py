"""Whose fault a training error is, decided once, where the trainer catches it.

The answer is a `Cause` (runspec.errors) kept in the trainer's result and then in the run's
record; the exit status an engine sees (75: a fresh machine) is decided from that alone, never
from an error's words. runspec's own errors carry their cause (`PeerHung`, a rendezvous that
timed out); torch's distributed errors have types of their own. A CUDA runtime error, an ECC
error and NCCL's or gloo's transport errors reach Python as a plain RuntimeError: torch gives
them no type, so their words (torch's, NCCL's and gloo's own) are read here and nowhere else.

A full disk is decided here too (`out_of_space`, kept as result.json's `no_space`): by an
OSError's errno wherever it sits in the chain; a worker's error that reaches the DDP
coordinator only as its traceback's last line is read from that line, here alone.
"""

from __future__ import annotations

import re

from runspec.errors import Cause
from runspec.store.room import NO_SPACE, is_no_space

# torch.distributed's own error types (torch/distributed/__init__.py: DistError and its kin).
TYPES: dict[str, Cause] = {
    "DistNetworkError": Cause.LINK,
    "DistBackendError": Cause.LINK,
    "DistStoreError": Cause.LINK,
    "PeerHung": Cause.LINK,  # runspec.trainer.peerwatch, named in a rank's error line
    "AcceleratorError": Cause.GPU,  # torch >= 2.8 raises it for a CUDA runtime error
}
# The words of the errors torch raises as a plain RuntimeError (c10/cuda/CUDAException.h "CUDA
# error: ", NCCL's ProcessGroupNCCL "NCCL error", gloo's tcp/pair.cc "Connection reset/closed
# by peer"), for those alone.
WORDS: tuple[tuple[str, Cause], ...] = (
    ("CUDA error", Cause.GPU),
    ("cuda runtime error", Cause.GPU),
    ("ECC error", Cause.GPU),
    ("NCCL", Cause.LINK),
    ("Connection reset by peer", Cause.LINK),
    ("Connection closed by peer", Cause.LINK),
)


def cause_of(exc: BaseException) -> Cause | None:
    """The cause an exception carries, or its type's, or (a plain RuntimeError) its words'."""
    carried = getattr(exc, "cause", None)
    if isinstance(carried, Cause):
        return carried
    for kind in type(exc).__mro__:
        if kind.__name__ in TYPES:
            return TYPES[kind.__name__]
    lines = str(exc).strip().splitlines()
    return cause_of_line(type(exc).__name__, lines[0] if lines else "")


def cause_of_line(error_type: str, message: str) -> Cause | None:
    """The cause of an error known by its type's name and its message: a rank's error line, or
    the worker's last line the DDP coordinator passes on."""
    if error_type in TYPES:
        return TYPES[error_type]
    if error_type not in ("RuntimeError", "Exception", "TorchrunFailed", "ChildFailedError"):
        return None  # a typed error of LibreYOLO's or Python's: the run's own
    return next((cause for words, cause in WORDS if words in message), None)


# A worker's OSError as the coordinator passes it on: "OSError: [Errno 28] No space left ..."
_ERRNO_LINE = re.compile(r"^\[Errno (\d{1,5})\]")
_OS_ERRORS = frozenset({"OSError", "IOError", "EnvironmentError"})


def out_of_space(exc: BaseException) -> bool:
    """Whether the error is a write that met a full disk (or quota): an OSError's errno, in
    the exception or anything it was raised from or while handling."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if is_no_space(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def out_of_space_line(error_type: str, message: str) -> bool:
    """The same, for a worker's error known only by its type's name and message."""
    found = _ERRNO_LINE.match(message) if error_type in _OS_ERRORS else None
    return found is not None and int(found.group(1)) in NO_SPACE
