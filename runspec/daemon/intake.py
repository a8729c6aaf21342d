"""What happens to a file the inbox takes: claimed, read, validated, then queued or rejected.

The inbox (runspec.daemon.inbox) decides when a file is taken; this decides what becomes of
it. A claim is `claimed/<id>/<name>`, decided at once; one left by a daemon that died before
deciding is decided at the next start. When rejected/ is not the daemon's own folder, a
rejection waits in its claim (parked) until it is again, and the daemon's status says why.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runspec.clock import Clock, utc_iso
from runspec.daemon import inboxfs
from runspec.daemon.inboxfs import DIR_FLAGS, FolderProblem, Folders
from runspec.errors import Problem, RunspecError
from runspec.printable import printable
from runspec.spec.loader import check_spec_text
from runspec.spec.model import Spec
from runspec.spec.specread import NotRegularFile, SpecTooBig, not_regular, read_spec
from runspec.spec.yamlload import too_big
from runspec.store.paths import rejected_dir
from runspec.store.state import RunRecord

log = logging.getLogger("runspec.daemon.inbox")

AcceptFn = Callable[[Spec, Path, dict[str, Any] | None, Clock], RunRecord]


@dataclass(frozen=True)
class IntakeOutcome:
    file: str  # the file's name, escaped for showing
    accepted: str | None = None  # the run's name
    rejected: Path | None = None  # where the file went
    reason: str = ""


def line(name: str, message: str, pointer: str = "") -> str:
    """One `.error` line about the whole file, in the validation format."""
    return str(Problem(name, 1, 1, pointer, message))


class Intake:
    def __init__(
        self, folders: Folders, inbox: Path, state: Path, accept: AcceptFn, clock: Clock
    ) -> None:
        self.folders = folders
        self.inbox = inbox
        self.state = state
        self.accept = accept
        self.clock = clock
        self._seq = 0
        # Claims whose rejection waits for rejected/ to be usable: id -> incomplete note.
        self.parked: dict[str, str | None] = {}

    # -- rejecting where it lies -----------------------------------------------------------
    def reject_here(self, name: str, lines: list[str]) -> list[IntakeOutcome]:
        """Reject a file where it lies in the inbox; it stays there while rejected/ is not
        usable (a rescan tries again)."""
        try:
            rejected = self.folders.rejected()
        except FolderProblem:
            return []
        try:
            error = ("\n".join(lines) + "\n").encode()
            dest = inboxfs.reject(self.folders.inbox, name, rejected, name, error)
        except FileNotFoundError:  # removed meanwhile: nothing left to answer
            return []
        finally:
            os.close(rejected)
        return [self._rejected(name, dest, lines)]

    def _rejected(self, name: str, dest: str, lines: list[str]) -> IntakeOutcome:
        where = rejected_dir(self.inbox) / dest
        # The daemon says it to people, as a warning (runspec.daemon.loop).
        log.debug("inbox: rejected %s -> %s: %s", name, where, lines[0])
        return IntakeOutcome(file=printable(name), rejected=where, reason="\n".join(lines))

    # -- claims ----------------------------------------------------------------------------
    def claim_and_decide(self, name: str, incomplete: str | None) -> list[IntakeOutcome]:
        """Claim `name` from the inbox and decide on it; `incomplete` says why its writer
        was not waited for any longer (the file is then rejected, whatever it holds)."""
        try:
            claimed = self.folders.claimed()
        except FolderProblem:
            return []  # it stays in the inbox, unclaimed; a rescan tries again
        try:
            self._seq += 1
            stamp = utc_iso(self.clock.time()).replace(":", "").replace("+0000", "Z")
            claim_id = f"{stamp}-{os.getpid()}-{self._seq:06d}"
            if not inboxfs.claim(self.folders.inbox, name, claimed, claim_id):
                return []  # gone meanwhile
            if incomplete is not None:  # kept with the claim: a restart still knows
                sub = os.open(claim_id, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=claimed)
                try:
                    inboxfs.write_private(sub, inboxfs.INCOMPLETE, incomplete.encode())
                finally:
                    os.close(sub)
        finally:
            os.close(claimed)
        return self.decide(claim_id, incomplete)

    def decide(self, claim_id: str, incomplete: str | None) -> list[IntakeOutcome]:
        """Read, validate, then accept or reject the file claimed as `claim_id`."""
        try:
            claimed = self.folders.claimed()
        except FolderProblem:
            self.parked[claim_id] = incomplete
            return []
        try:
            sub = os.open(claim_id, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=claimed)
            try:
                outcomes = self._decide_in(sub, incomplete)
            finally:
                os.close(sub)
            if outcomes is None:
                self.parked[claim_id] = incomplete
                return []
            inboxfs.remove_claim(claimed, claim_id)
            return outcomes
        finally:
            os.close(claimed)

    def _decide_in(self, sub: int, incomplete: str | None) -> list[IntakeOutcome] | None:
        """The outcome for the claim in `sub`; None when its rejection must wait."""
        names = [n for n in os.listdir(sub) if not n.startswith(".")]
        if not names:  # a claim whose file never arrived (a crash in between)
            return []
        name = names[0]
        shown = printable(name)
        try:
            spec, lines = self._judge(sub, name, shown, incomplete)
            if spec is not None and not lines:
                provenance = self._provenance(sub, shown)
                record = self.accept(spec, self.state, provenance, self.clock)
                log.info("inbox: accepted %s as run %s (queued)", shown, record.name)
                return [IntakeOutcome(file=shown, accepted=record.name)]
        except RunspecError as exc:  # the name is taken
            lines = [line(shown, str(exc), "/name")]
        except Exception as exc:  # a bug or a broken state folder: answered, never looped on
            log.exception("inbox: cannot decide on %s", shown)
            reason = f"runspec could not queue it ({type(exc).__name__}: {exc}); see its log"
            lines = [line(shown, reason)]
        try:
            rejected = self.folders.rejected()
        except FolderProblem:
            return None
        try:
            error = ("\n".join(lines) + "\n").encode()
            dest = inboxfs.reject(sub, name, rejected, name, error)
        finally:
            os.close(rejected)
        return [self._rejected(name, dest, lines)]

    def _judge(
        self, sub: int, name: str, shown: str, incomplete: str | None
    ) -> tuple[Spec | None, list[str]]:
        """The spec, or why the file is refused (`.error` lines)."""
        data, lines = self._read(sub, name, shown)
        spec = None
        if data is not None:
            spec, problems = check_spec_text(data, shown, self.state)
            lines = [str(p) for p in problems]
        if incomplete is not None:
            advice = "write a spec under another name and rename it in (runspec submit does)"
            lines.insert(0, line(shown, f"incomplete: {incomplete}; {advice}"))
        return spec, lines

    @staticmethod
    def _read(sub: int, name: str, shown: str) -> tuple[bytes | None, list[str]]:
        """The claimed file's bytes, or None and why it cannot be read as a spec."""
        try:
            return read_spec(name, dir_fd=sub, follow=False), []
        except SpecTooBig as exc:
            return None, [str(too_big(exc.size, shown))]
        except NotRegularFile as exc:
            return None, [line(shown, str(exc))]
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # swapped for a link after the inbox looked
                mode = os.stat(name, dir_fd=sub, follow_symlinks=False).st_mode
                return None, [line(shown, not_regular(name, mode, sub))]
            return None, [line(shown, f"cannot read it: {exc.strerror or exc}")]

    def _provenance(self, sub: int, shown: str) -> dict[str, Any]:
        provenance: dict[str, Any] = {"inbox_file": shown, "claimed_at": utc_iso(self.clock.time())}
        try:
            loaded = json.loads(read_spec(inboxfs.SIDECAR, dir_fd=sub, follow=False))
        except FileNotFoundError:
            loaded = {"via": "inbox"}
        except (OSError, ValueError, RunspecError, SpecTooBig) as exc:
            log.warning("ignoring unreadable provenance for %s: %s", shown, exc)
            loaded = {"via": "inbox"}
        if isinstance(loaded, dict):
            provenance.update(loaded)
        return provenance

    # -- after a crash, and after rejected/ is usable again --------------------------------
    def retry_parked(self) -> list[IntakeOutcome]:
        outcomes: list[IntakeOutcome] = []
        for claim_id, incomplete in list(self.parked.items()):
            del self.parked[claim_id]
            outcomes += self.decide(claim_id, incomplete)
        return outcomes

    def recover(self) -> list[IntakeOutcome]:
        """Decide on the claims a daemon left when it died (or was stopped) mid-decision."""
        try:
            claimed = self.folders.claimed()
        except FolderProblem:
            return []
        outcomes: list[IntakeOutcome] = []
        try:
            for entry in sorted(os.listdir(claimed)):
                if entry in self.parked or entry.endswith(inboxfs.SIDECAR):
                    continue
                try:
                    outcomes += self._recover_one(claimed, entry)
                except Exception:  # a full disk, say: kept for the next start, never looped on
                    log.exception("inbox: cannot decide on claimed %s yet", printable(entry))
        finally:
            os.close(claimed)
        return outcomes

    def _recover_one(self, claimed: int, entry: str) -> list[IntakeOutcome]:
        mode = os.stat(entry, dir_fd=claimed, follow_symlinks=False).st_mode
        if stat.S_ISREG(mode):
            return self._recover_flat(claimed, entry)
        if not stat.S_ISDIR(mode):
            log.warning("inbox: ignoring %s in claimed/: not a claim", printable(entry))
            return []
        sub = os.open(entry, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=claimed)
        try:
            incomplete = None
            with contextlib.suppress(FileNotFoundError):
                incomplete = read_spec(inboxfs.INCOMPLETE, dir_fd=sub, follow=False).decode()
            for name in os.listdir(sub):
                if not name.startswith("."):
                    self._finish_move(sub, name, name)
                    self._finish_move(sub, inboxfs.SIDECAR, f".{name}{inboxfs.SIDECAR}")
        finally:
            os.close(sub)
        return self.decide(entry, incomplete)

    def _finish_move(self, sub: int, name: str, inbox_name: str) -> None:
        """A claim moves by link then unlink: a crash in between leaves the inbox's name
        beside the claimed one, the same file; the move is finished, not handled twice."""
        try:
            st = os.stat(name, dir_fd=sub, follow_symlinks=False)
            there = os.stat(inbox_name, dir_fd=self.folders.inbox, follow_symlinks=False)
        except OSError:  # gone, or a name too long to have a sidecar
            return
        if st.st_nlink > 1 and (there.st_dev, there.st_ino) == (st.st_dev, st.st_ino):
            os.unlink(inbox_name, dir_fd=self.folders.inbox)

    def _recover_flat(self, claimed: int, entry: str) -> list[IntakeOutcome]:
        """A claim from a runspec before claims had folders: `<stamp>-<pid>-<seq>-<name>`."""
        name = entry.split("-", 3)[-1]
        self._seq += 1
        claim_id = f"{entry.split('-', 3)[0]}-{os.getpid()}-{self._seq:06d}-recovered"
        os.mkdir(claim_id, 0o700, dir_fd=claimed)
        sub = os.open(claim_id, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=claimed)
        try:
            inboxfs.move(claimed, entry, sub, name)
            with contextlib.suppress(FileNotFoundError):
                inboxfs.move(claimed, entry + inboxfs.SIDECAR, sub, inboxfs.SIDECAR)
        finally:
            os.close(sub)
        return self.decide(claim_id, None)
