"""The attempt ledger: `runspec/attempts.json` at the push target, one run's attempts under an
engine (issue 36).

An engine (SkyPilot, dstack, HF Jobs) starts `runspec run` again on a fresh machine after a
preemption, a failure or a retry, with nothing of the last machine's disk. What every attempt
must know before it pays for anything slow is kept here, written by node 0 before its preflight:
the run's identity (the engine's task id where it has one), when its budget started, and each
attempt's start, the newest verified epoch at that start, and (when it lived to say it) its end
and exit status. A run the ledger marks terminal exits at once with the status it ended with.

Someone else may write the target (anyone in the repo's org), so the file is read through the
capped strict reader (runspec.hubread, runspec.push.fetch.Source) and its fields strictly here;
a ledger that is not one is refused in one line, never guessed at.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from runspec.clock import parse_utc_iso
from runspec.errors import UsageError
from runspec.hubreach import endpoint_set
from runspec.hubread import MAX_BYTES, HostileFile, TooBig, strict_json, within
from runspec.printable import printable
from runspec.push.base import PushFailed, one_line
from runspec.push.fetch import Source
from runspec.push.quota import hub_commit
from runspec.push.remote import ATTEMPTS
from runspec.spec.model import Spec
from runspec.store.atomic import write_text

LEDGER_SCHEMA = 1
KEPT = 50  # attempts kept in the file: the bound needs only the last few
MAX_TEXT = 200
WRITE_S = 60.0  # one write of the ledger, in all: it comes before anything slow
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
DELETE_FIX = "delete it there to let the engine start this run over"


class DamagedLedger(UsageError):
    """The target's attempts.json is not a ledger runspec wrote: exit 2, saying where."""


@dataclass
class Attempt:
    n: int
    started_at: str  # ISO UTC, before anything slow
    verified_epoch: int  # the newest verified checkpoint's epoch at the target at its start
    engine: str
    ended_at: str | None = None
    exit: int | None = None  # the status it exited with, when it lived to write it
    outcome: str | None = None
    # Where the target stood when the gate read it, so that node 1 and up start where node 0
    # does (runspec.run.followstart): the newest verified epoch it held, whatever run's (a new
    # task starts at 0 beside another task's weights), and its commit (None in a folder).
    # Both None in a ledger written before they were kept.
    target_epoch: int | None = None
    commit: str | None = None


@dataclass
class Ledger:
    run: str
    spec_sha256: str
    task_id: str | None  # the engine's id for the run; None where it gives none
    budget_started_at: str
    attempts: list[Attempt] = field(default_factory=list)
    # Set once the run is over for good: {"reason", "exit", "at"}; later attempts exit with it.
    terminal: dict[str, Any] | None = None
    schema: int = LEDGER_SCHEMA

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["attempts"] = out["attempts"][-KEPT:]
        return out

    def no_progress(self, verified_now: int) -> int:
        """How many attempts in a row, newest last, ended with no newer verified epoch than
        they started with (read from the next attempt's start, or `verified_now`): an attempt
        killed without a word is judged by what the target held after it."""
        after = [a.verified_epoch for a in self.attempts[1:]] + [verified_now]
        count = 0
        for attempt, later in zip(reversed(self.attempts), reversed(after), strict=True):
            if later > attempt.verified_epoch:
                break
            count += 1
        return count

    @classmethod
    def from_json(cls, data: Any, where: str) -> Ledger:
        """Raises DamagedLedger for anything that is not a ledger of this schema."""
        try:
            return _read(data)
        except (TypeError, ValueError, KeyError) as exc:
            raise DamagedLedger(
                f"{where}: {ATTEMPTS} is not a runspec attempt ledger ({printable(str(exc))}); "
                f"{DELETE_FIX}"
            ) from exc


def _text(value: Any, key: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
        raise ValueError(f"{key} is not a short text")
    return value


def _time(value: Any, key: str, *, optional: bool = False) -> Any:
    text = _text(value, key, optional=optional)
    if text is not None:
        parse_utc_iso(text)  # ValueError when it is not a time
    return text


def _count(value: Any, key: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1_000_000:
        raise ValueError(f"{key} is not a count")
    return value


def _commit(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not _COMMIT.match(value)):
        raise ValueError("commit is not a commit id")
    return value


def _object(value: Any, key: str, keys: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"{key} is not an object")
    unknown = set(value) - keys
    if unknown:
        raise KeyError(f"{key} has unknown keys {sorted(unknown)}")
    return value


def _read(data: Any) -> Ledger:
    top = _object(data, "the file", {f for f in Ledger.__dataclass_fields__})
    if top.get("schema") != LEDGER_SCHEMA:
        raise ValueError(f"schema {top.get('schema')!r} is not {LEDGER_SCHEMA}")
    sha = _text(top.get("spec_sha256"), "spec_sha256")
    if not _SHA256.match(sha):
        raise ValueError("spec_sha256 is not a sha256")
    raw = top.get("attempts")
    if not isinstance(raw, list) or len(raw) > KEPT:
        raise ValueError(f"attempts is not a list of at most {KEPT}")
    attempts = []
    for item in raw:
        one = _object(item, "an attempt", set(Attempt.__dataclass_fields__))
        attempts.append(
            Attempt(
                n=_count(one.get("n"), "n"),
                started_at=_time(one.get("started_at"), "started_at"),
                verified_epoch=_count(one.get("verified_epoch"), "verified_epoch"),
                engine=_text(one.get("engine"), "engine"),
                ended_at=_time(one.get("ended_at"), "ended_at", optional=True),
                exit=_count(one.get("exit"), "exit", optional=True),
                outcome=_text(one.get("outcome"), "outcome", optional=True),
                target_epoch=_count(one.get("target_epoch"), "target_epoch", optional=True),
                commit=_commit(one.get("commit")),
            )
        )
    terminal = top.get("terminal")
    if terminal is not None:
        terminal = _object(terminal, "terminal", {"reason", "exit", "at"})
        _text(terminal.get("reason"), "terminal.reason")
        if terminal.get("exit") not in (0, 2):
            raise ValueError("terminal.exit is neither 0 nor 2")
        _time(terminal.get("at"), "terminal.at")
    return Ledger(
        run=_text(top.get("run"), "run"),
        spec_sha256=sha,
        task_id=_text(top.get("task_id"), "task_id", optional=True),
        budget_started_at=_time(top.get("budget_started_at"), "budget_started_at"),
        attempts=attempts,
        terminal=terminal,
    )


def read_ledger(source: Source) -> Ledger | None:
    """The ledger at `source` (pinned by the caller); None where there is none. Raises
    PushFailed (the target cannot be read) or DamagedLedger."""
    fix = DELETE_FIX
    try:
        raw = source.small(ATTEMPTS, max_bytes=MAX_BYTES)
        data = strict_json(raw) if raw else None
    except TooBig as exc:  # what runspec writes is a few kilobytes
        too_big = f"{source.where}: {ATTEMPTS} is over {MAX_BYTES} bytes, not a runspec ledger"
        raise DamagedLedger(f"{too_big}; {fix}") from exc
    except HostileFile as exc:
        raise DamagedLedger(f"{source.where}: {ATTEMPTS}: {exc}; {fix}") from exc
    except OSError as exc:
        raise PushFailed(f"cannot read {source.where}: {one_line(exc)}") from exc
    return None if data is None else Ledger.from_json(data, source.where)


def ledger_bytes(ledger: Ledger) -> bytes:
    return json.dumps(ledger.to_json(), indent=1, sort_keys=True).encode() + b"\n"


def write_ledger(
    source: Source, spec: Spec, ledger: Ledger, message: str, total_s: float = WRITE_S
) -> None:
    """The ledger to `source`: a commit of its own on the Hub (the repo made when missing, as a
    push makes it), within `total_s` in all; an atomic file in a folder target. Raises
    PushFailed."""
    body = ledger_bytes(ledger)
    if source.folder is not None:
        try:
            write_text(source.folder / ATTEMPTS, body.decode(), mode=0o644)
        except OSError as exc:
            raise PushFailed(f"cannot write {source.where}: {one_line(exc)}") from exc
        return
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import RepositoryNotFoundError

    repo = source.hub or ""
    api = HfApi(endpoint=endpoint_set())
    private = spec.push is None or spec.push.hub is None or spec.push.hub.private
    op = CommitOperationAdd(path_in_repo=ATTEMPTS, path_or_fileobj=body)

    def commit() -> object:
        try:
            api.repo_info(repo, repo_type="model")
        except RepositoryNotFoundError:
            api.create_repo(repo, repo_type="model", private=private, exist_ok=True)
        return api.create_commit(repo, operations=[op], commit_message=message, repo_type="model")

    try:  # under the repo's commit quota with the pushes (runspec.push.quota)
        within(total_s, f"writing {ATTEMPTS}", lambda: hub_commit(repo, commit))
    except PushFailed:
        raise
    except Exception as exc:  # the client's errors, whatever the client is
        raise PushFailed(f"cannot write {ATTEMPTS} to {source.where}: {one_line(exc)}") from exc
