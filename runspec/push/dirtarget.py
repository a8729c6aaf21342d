"""The dir target: a folder on a mounted persistent volume, `<dir>/<name>/` in the run
folder's layout.

Each file is written to a temporary name beside its place, fsynced and renamed, so a push
cut short never damages a copy that was verified before. The manifest is written last: it
is the commit point. Verification re-reads from the volume what was written (after fsync)
and hashes it; files this push did not send are checked for presence and size.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from runspec.checkresult import CheckResult, failed, passed
from runspec.push.base import PushFailed, PushTarget, StagedFile, one_line
from runspec.push.manifest import CHUNK, ManifestEntry, digest_file
from runspec.push.remote import MANIFEST
from runspec.spec.model import FinishAction, Spec
from runspec.store.atomic import fsync_dir
from runspec.store.paths import RunPaths

# A pushed copy is the owner's alone, like the run folder it copies (the trainer's UMask=0077):
# weights and logs may hold what other users of the volume should not read. Whoever is to
# share them copies them on, or chmods the folder.
FILE_MODE = 0o600
DIR_MODE = 0o700


def _inside(root: Path, relpath: str) -> Path:
    target = (root / relpath).resolve()
    if not target.is_relative_to(root.resolve()):
        raise PushFailed(f"refusing to write {relpath!r} outside {root}")
    return target


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


class DirTarget(PushTarget):
    key = "dir"

    def __init__(self, root: Path, name: str) -> None:
        self.root = root / name
        self.description = f"dir {self.root}"

    @classmethod
    def folder(cls, spec: Spec, paths: RunPaths) -> Path:
        """The run's folder under push.dir (relative to the state folder when relative)."""
        assert spec.push is not None and spec.push.dir is not None
        return paths.resolve(spec.push.dir) / spec.name

    @classmethod
    def from_spec(cls, spec: Spec, paths: RunPaths) -> DirTarget:
        folder = cls.folder(spec, paths)
        return cls(folder.parent, folder.name)

    @classmethod
    def where(cls, spec: Spec, paths: RunPaths) -> str:
        return f"dir {cls.folder(spec, paths)}"

    @classmethod
    def dies_with_machine(cls, spec: Spec, paths: RunPaths) -> str | None:
        """A folder on the filesystem of / or of the state folder is the machine's own disk:
        a destroy takes it along."""
        target = _existing(cls.folder(spec, paths))
        dev = os.stat(target).st_dev
        for name, where in (("/", Path("/")), ("the state folder", paths.state)):
            if dev == os.stat(_existing(where)).st_dev:
                return f"push.dir {cls.folder(spec, paths)} is on the same disk as {name}"
        return None

    @classmethod
    def preflight(cls, spec: Spec, paths: RunPaths) -> CheckResult:
        target = cls.folder(spec, paths)
        if spec.finish.action in (FinishAction.DESTROY, FinishAction.AUTO):
            local = cls.dies_with_machine(spec, paths)
            if local is not None:
                return failed(
                    "push",
                    f"{local}: {spec.finish.action.value} would delete the only copy",
                    "push to the Hub (push.hub), to a mounted volume that outlives the "
                    "machine, or use finish.action: stop (it keeps the disk)",
                )
        probe = target / f".runspec-preflight-{os.getpid()}"
        try:
            target.mkdir(parents=True, exist_ok=True)
            with probe.open("wb") as fh:
                fh.write(b"runspec preflight\n")
                fh.flush()
                os.fsync(fh.fileno())
            probe.unlink()
        except OSError as exc:
            return failed(
                "push",
                f"cannot write to push.dir {target}: {exc.strerror or exc}",
                "mount the volume, or fix its permissions for the user runspec runs as",
            )
        return passed("push", f"push.dir {target} is writable")

    def push(self, uploads: Sequence[StagedFile], message: str) -> str | None:
        # The manifest goes last, so a reader never sees it name a file not yet in place.
        ordered = sorted(uploads, key=lambda item: item.entry.path == MANIFEST)
        try:
            self.root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            for item in ordered:
                self._write(item)
        except PushFailed:
            raise
        except OSError as exc:
            raise PushFailed(f"push to {self.description} failed: {one_line(exc)}") from exc
        return None

    def _write(self, item: StagedFile) -> None:
        target = _inside(self.root, item.entry.path)
        target.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as dst, item.local.open("rb") as src:
                shutil.copyfileobj(src, dst, CHUNK)
                dst.flush()
                os.fsync(dst.fileno())
            os.chmod(tmp, FILE_MODE)
            os.replace(tmp, target)
        finally:
            Path(tmp).unlink(missing_ok=True)
        fsync_dir(target.parent)

    def verify(
        self, commit: str | None, expected: Sequence[ManifestEntry], uploaded: Sequence[StagedFile]
    ) -> list[str]:
        sent = {item.entry.path for item in uploaded}
        problems = []
        for entry in expected:
            try:
                target = _inside(self.root, entry.path)
                if entry.path in sent:
                    got = digest_file(target)
                    if got.size != entry.size or got.sha256 != entry.sha256:
                        problems.append(
                            f"{entry.path}: copy has sha256 {got.sha256[:12]}, "
                            f"size {got.size}; expected {entry.sha256[:12]}, {entry.size}"
                        )
                elif target.stat().st_size != entry.size:
                    problems.append(f"{entry.path}: copy size differs from the manifest")
            except (OSError, PushFailed) as exc:
                problems.append(f"{entry.path}: {one_line(exc)}")
        return problems

    def read_back(self, commit: str | None, entries: Sequence[ManifestEntry]) -> list[str]:
        problems = []
        for entry in entries:
            try:
                got = digest_file(_inside(self.root, entry.path))
            except (OSError, PushFailed) as exc:
                problems.append(f"{entry.path}: read-back failed: {one_line(exc)}")
                continue
            if (got.size, got.sha256) != (entry.size, entry.sha256):
                problems.append(
                    f"{entry.path}: the folder holds sha256 {got.sha256[:12]}, "
                    f"{got.size} bytes; expected {entry.sha256[:12]}, {entry.size}"
                )
        return problems
