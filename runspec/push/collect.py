"""What a push sends, as whole staged copies: complete checkpoints, run files, runspec/.

Checkpoints reach the staging folder only through `runspec.trainer.checkpoints` (complete by the
epoch marker, copied, re-checked, renamed), because LibreYOLO rewrites `last.pt` in place.
Run files (status.json, train.log, ...) are snapshot-copied there too, so what is hashed is
what is uploaded. The staged copy of each checkpoint stays until a newer complete one
replaces it: a trainer killed mid-save still leaves the last good one ready to push.

An index (`<staged>/.index.json`) remembers, per staged file, the source's size and mtime it
was copied from and the copy's hashes, so an unchanged file is neither copied nor hashed
again.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runspec.clock import Clock, utc_iso
from runspec.push import remote
from runspec.push.base import StagedFile
from runspec.push.manifest import CHUNK, ManifestEntry, digest_file
from runspec.push.remote import MANIFEST
from runspec.push.report import libreyolo_plots
from runspec.spec.model import Spec
from runspec.spec.provenance import public
from runspec.store.atomic import write_json_atomic, write_text
from runspec.store.paths import RunPaths
from runspec.trainer.checkpoints import CheckpointFile, complete_checkpoints, stage_copy
from runspec.trainer.control import FileStat, read_epoch_marker

INDEX = ".index.json"
CARD = "README.md"  # at the target's root: the Hub shows it as the repo's page


def is_checkpoint(relpath: str) -> bool:
    return relpath.startswith("weights/") and relpath.endswith(".pt")


def is_immutable(relpath: str) -> bool:
    """weights/epoch_N.pt never changes once complete (a resume rewrites only later epochs)."""
    return fnmatch.fnmatchcase(relpath, "weights/epoch_*.pt")


@dataclass(frozen=True)
class Staged:
    source: FileStat | None  # the source as copied
    entry: ManifestEntry
    released: bool = False  # verified at the target and its staged copy deleted


class Stager:
    def __init__(self, spec: Spec, paths: RunPaths, clock: Clock) -> None:
        assert spec.push is not None
        self.spec = spec
        self.paths = paths
        self.clock = clock
        self.globs = spec.push.files
        self.dir = paths.staged_dir
        self.index: dict[str, Staged] = self._load_index()

    # --- the index ------------------------------------------------------------------------------
    def _load_index(self) -> dict[str, Staged]:
        try:
            data = json.loads((self.dir / INDEX).read_text())
        except (OSError, ValueError):
            return {}
        index = {}
        for path, item in data.items():
            try:
                source = FileStat(**item["source"]) if item.get("source") else None
                entry = ManifestEntry.from_json(item["entry"])
                released = bool(item.get("released", False))
            except (KeyError, TypeError, ValueError):
                continue
            if released or (self.dir / path).is_file():
                index[path] = Staged(source, entry, released)
        return index

    def _save_index(self) -> None:
        data = {
            path: {
                "source": vars(s.source) if s.source else None,
                "entry": vars(s.entry),
                "released": s.released,
            }
            for path, s in self.index.items()
        }
        write_json_atomic(self.dir / INDEX, data)

    # --- what is there to push ------------------------------------------------------------------
    def wanted(self, relpath: str) -> bool:
        return any(fnmatch.fnmatchcase(relpath, pattern) for pattern in self.globs)

    def complete(self) -> list[CheckpointFile]:
        """The complete checkpoints the spec's globs ask for."""
        found = complete_checkpoints(self.paths.run_dir, self.paths.control_dir)
        return [c for c in found if self.wanted(c.relpath)]

    def fresh(self, item: CheckpointFile) -> bool:
        """True when this complete checkpoint is not what is staged for its path."""
        staged = self.index.get(item.relpath)
        return staged is None or staged.source != item.stat

    def run_files(self) -> list[str]:
        """Files of the run folder the globs match, checkpoints excepted (they come only
        through `complete`)."""
        run_dir = self.paths.run_dir
        found: set[str] = set()
        for pattern in self.globs:
            for path in run_dir.glob(pattern):
                rel = path.relative_to(run_dir).as_posix()
                if path.is_file() and not is_checkpoint(rel):
                    found.add(rel)
        return sorted(found)

    def pending_bytes(self, verified: dict[str, ManifestEntry]) -> int:
        """Bytes a push would send now, from stat alone (cheap: called every tick)."""
        total = 0
        run_dir = self.paths.run_dir
        for pattern in self.globs:
            for path in run_dir.glob(pattern):
                rel = path.relative_to(run_dir).as_posix()
                try:
                    stat = FileStat.of(path)
                except OSError:
                    continue
                staged = self.index.get(rel)
                if staged is None or staged.source != stat or verified.get(rel) != staged.entry:
                    total += stat.size
        return total

    # --- staging -------------------------------------------------------------------------------
    def stage(self, final: bool, complete: list[CheckpointFile] | None = None) -> list[StagedFile]:
        """Bring the staging folder up to date; return every staged file (not the manifest).
        `complete`: the result of `complete()` when the caller has it already."""
        marker = read_epoch_marker(self.paths.control_dir)
        epoch = marker.epoch if marker is not None else None
        for item in self.complete() if complete is None else complete:
            if self.fresh(item) and (copy := stage_copy(self.paths.run_dir, item, self.dir)):
                self._record(item.relpath, copy, item.stat, item.epoch)
        for rel in self.run_files():
            self._snapshot(self.paths.run_dir / rel, rel, epoch)
        paths = self.paths
        write_public_provenance(paths)
        extras = {
            remote.SPEC: paths.spec_file,
            remote.PROVENANCE: paths.public_provenance_file,
        }
        if final:
            # A failed run's story must be readable after the machine is gone (its record
            # goes with every push: runspec.push.hubrecord). The card goes out after these
            # are verified (runspec.push.cardpush): a card the Hub refuses must not hold back
            # the weights; the pictures it points at go now.
            extras[remote.LOG] = paths.runspec_log
            extras[remote.CURVES] = paths.curves_png
            extras.update({rel: paths.run_dir / rel for rel in libreyolo_plots(paths.run_dir)})
        for rel, source in extras.items():
            self._snapshot(source, rel, epoch)
        self._save_index()
        return [
            StagedFile(s.entry, self.dir / path)
            for path, s in sorted(self.index.items())
            if not s.released
        ]

    def _snapshot(self, source: Path, rel: str, epoch: int | None) -> None:
        try:
            stat = FileStat.of(source)
            src = source.open("rb")
        except OSError:
            return  # vanished or unreadable: the next push tries again
        with src:
            staged = self.index.get(rel)
            if staged is not None and staged.source == stat:
                return
            target = self.dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            # A failed write (a full disk) raises: the push fails, never silently sends less.
            fd, tmp = tempfile.mkstemp(
                prefix=f".{target.name}.", suffix=".partial", dir=target.parent
            )
            try:
                with os.fdopen(fd, "wb") as dst:
                    shutil.copyfileobj(src, dst, CHUNK)
                os.replace(tmp, target)
            finally:
                Path(tmp).unlink(missing_ok=True)
        self._record(rel, target, stat, epoch)

    def _record(self, rel: str, copy: Path, source: FileStat | None, epoch: int | None) -> None:
        digest = digest_file(copy)
        old = self.index.get(rel)
        if old is not None and old.entry.sha256 == digest.sha256:
            entry = old.entry  # same content: keep the time it was first staged
        else:
            entry = ManifestEntry(
                path=rel,
                size=digest.size,
                sha256=digest.sha256,
                epoch=epoch,
                time=utc_iso(self.clock.time()),
                blob_id=digest.blob_id,
            )
        self.index[rel] = Staged(source, entry)

    def add_manifest(self, text: str) -> StagedFile:
        """Stage the manifest itself (pushed with every push, never listed in itself)."""
        return self.add_text(MANIFEST, text)

    def add_text(self, rel: str, text: str) -> StagedFile:
        """Stage a file runspec writes for this push alone (the manifest, the record)."""
        target = self.dir / rel
        write_text(target, text)
        digest = digest_file(target)
        entry = ManifestEntry(
            path=rel,
            size=digest.size,
            sha256=digest.sha256,
            epoch=None,
            time=utc_iso(self.clock.time()),
            blob_id=digest.blob_id,
        )
        return StagedFile(entry, target)

    def release(self, verified: dict[str, ManifestEntry]) -> None:
        """Drop staged copies of epoch_N.pt files that are verified at the target: they never
        change, and keeping every one would fill the disk. last.pt and best.pt stay staged."""
        for rel in list(self.index):
            staged = self.index[rel]
            if is_immutable(rel) and not staged.released and verified.get(rel) == staged.entry:
                (self.dir / rel).unlink(missing_ok=True)
                self.index[rel] = Staged(staged.source, staged.entry, released=True)
        self._save_index()

    def forget(self, rels: set[str]) -> None:
        """The target lost these: a released copy is staged again from the run folder (while
        the file is there) at the next push."""
        for rel in rels & set(self.index):
            if self.index[rel].released:
                del self.index[rel]
        self._save_index()


def write_public_provenance(paths: RunPaths) -> None:
    """The provenance as it may leave the machine, beside the job folder's whole one."""
    try:
        whole = json.loads(paths.provenance_file.read_text())
    except (OSError, ValueError):
        return  # none recorded: nothing pushed for it
    if isinstance(whole, dict):
        write_json_atomic(paths.public_provenance_file, public(whole), mode=0o644)
