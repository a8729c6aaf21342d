"""What the notifications say (runspec.alerts sends them): short titles a phone shows, and a
body with what the person who walked away needs to decide anything."""

from __future__ import annotations

import socket

from runspec.alerts import Message
from runspec.clock import human_duration
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths
from runspec.store.state import RunRecord, Termination
from runspec.views.report import FAILED, summary_lines


def _host() -> str:
    return socket.gethostname() or "this machine"


def started(spec: Spec, record: RunRecord) -> Message:
    body = (
        f"{spec.train.model}, {spec.train.epochs} epochs on {_host()}; budget "
        f"{human_duration(spec.budget.wall_clock)} (the finish by {record.deadline})"
    )
    return Message("training started", f"runspec: {spec.name} started training", body)


def budget_stop(spec: Spec, why: str) -> Message:
    return Message(
        "the budget stops training",
        f"runspec: {spec.name}: the budget stops training",
        f"{why}; the last weights are pushed before the deadline",
        "warning",
    )


def ended(spec: Spec, paths: RunPaths, record: RunRecord, verified: bool, nxt: str) -> Message:
    """The run's end, sent before its finish acts: what it came to, and what comes next."""
    term = record.termination or Termination.COMPLETED
    failed = term in FAILED
    kind = "failure" if failed or not verified else "success"
    what = "failed" if failed else term.value
    lines = [line.strip() for line in summary_lines(spec, paths, record)]
    if not verified and spec.push is not None:
        lines.append("the final push is NOT verified: the weights may be only on the machine")
    lines.append(f"next: {nxt}")
    return Message(what, f"runspec: {spec.name} {what}", "\n".join(lines), kind)


def machine_end(run: str, plan: str, why: str) -> Message:
    """A finish that acts for the whole machine, applied later than its run's end (deferred,
    idle, the failsafe)."""
    return Message(
        "the machine's end", f"runspec: ending the machine ({run})", f"{plan}\nwhy: {why}"
    )


def unconfirmed(run: str, summary: str, detail: str) -> Message:
    """A finish whose end of billing is not confirmed: the machine may still bill."""
    return Message(
        "the finish is not confirmed",
        f"runspec: {run}: the machine may still be billing",
        f"{summary}\n{detail}\nstop or destroy the machine yourself once the weights are safe",
        "failure",
    )
