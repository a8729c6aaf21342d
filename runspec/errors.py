"""The one family of errors a user can cause, and how a command turned out.

Everything raised on purpose derives from RunspecError; the CLI and the daemon loop catch it
once, print its one line and turn its `Outcome` into an exit status (runspec.cli, the one place
exit codes come from). Anything else is a bug and keeps its traceback (in the debug log).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from runspec.printable import printable


class Outcome(str, enum.Enum):
    """How a command turned out; runspec.cli maps each to its exit status."""

    OK = "ok"
    FAILED = "failed"  # a run failed, or a preflight check failed
    INVALID = "invalid"  # a spec is invalid
    USAGE = "usage"  # the command was used wrongly, or a file could not be read
    UNVERIFIED = "unverified"  # the run ended but its final push could not be verified
    RETRY = "retry"  # under an engine: this machine cannot train the run; give it a fresh one
    INTERRUPTED = "interrupted"  # a second Ctrl-C gave the run up at once


class Cause(str, enum.Enum):
    """Why a run failed where the failure is not the spec's own: decided where the error is
    caught (the trainer, a preflight check), kept in the run's record, and the only ground on
    which an engine's exit status departs from a plain failure. GPU and LINK are this
    machine's: a fresh machine may pass (exit 75). MACHINE_KIND is the kind of machine, or the
    install on it, the run was given: no fresh machine like it passes (exit 2). A failure with
    no cause is the run's own."""

    GPU = "gpu"  # a GPU, its driver or its memory failed, or checking it hung
    LINK = "link"  # the link between ranks or nodes: NCCL, gloo, a peer gone or hung
    # No NVIDIA device where the spec needs a GPU, a CPU-only torch, a driver older than the
    # CUDA torch is built for (runspec.preflight.gpu).
    MACHINE_KIND = "machine-kind"

    @property
    def fresh_machine_may_pass(self) -> bool:
        return self is not Cause.MACHINE_KIND


# Each outcome's exit status (the README's table; runspec.cli turns outcomes into them).
EXIT_CODES: dict[Outcome, int] = {
    Outcome.OK: 0,
    Outcome.FAILED: 1,
    Outcome.INVALID: 2,
    Outcome.USAGE: 2,
    Outcome.UNVERIFIED: 3,
    Outcome.RETRY: 75,  # EX_TEMPFAIL, what SkyPilot's recover_on_exit_codes names
    Outcome.INTERRUPTED: 130,  # 128 + SIGINT, as a shell reports a command a Ctrl-C ended
}


class RunspecError(Exception):
    """An error a user can cause and fix; its message is one clear line."""

    outcome = Outcome.FAILED


class UsageError(RunspecError):
    outcome = Outcome.USAGE


class GaveUp(RunspecError):
    """A second signal gave a slow step up at once (runspec.run.giveup); the message names
    the step and what it leaves."""

    outcome = Outcome.INTERRUPTED


@dataclass(frozen=True)
class Problem:
    """One validation problem, located in the file it came from."""

    file: str
    line: int
    column: int
    pointer: str
    message: str

    def __str__(self) -> str:
        # File names, keys and values come from whoever wrote the spec: a terminal escape or a
        # newline among them must show as text, not act (see runspec.printable).
        # A problem of the whole file (its YAML, its size) has no pointer: no empty field.
        where = f"{self.pointer}: " if self.pointer else ""
        text = f"{self.file}:{self.line}:{self.column}: {where}{self.message}"
        return printable(text)

    def as_dict(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "pointer": self.pointer,
            "message": self.message,
        }


class SpecInvalid(RunspecError):
    """A spec failed validation; carries every problem found in it."""

    outcome = Outcome.INVALID

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))
