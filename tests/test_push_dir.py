"""Pushes to a folder on a mounted volume: `<dir>/<name>/`, each file renamed into place."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

from runspec.push.base import StagedFile
from runspec.push.dirtarget import DirTarget
from runspec.push.manifest import ManifestEntry, digest_file
from runspec.units import format_bytes
from runspec.views.report import summary_lines
from tests.fixtures_push import FakeRun, MakeRun, wait_until


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def target_dir(run: FakeRun) -> Path:
    return run.paths.state / "pushed" / run.spec.name  # push.dir: pushed (relative to state)


def test_push_lands_in_the_run_folder_layout(make_run: MakeRun) -> None:
    run = make_run("dir")
    run.epoch(1)
    run.epoch(2)
    pushed = run.pusher().push_now(final=False, timeout=60)
    assert pushed is not None and pushed.epoch == 2 and pushed.commit is None
    out = target_dir(run)
    for rel in (
        "weights/last.pt",
        "weights/best.pt",
        "weights/epoch_2.pt",
        "status.json",
        "metrics.jsonl",
        "train.log",
        "train_config.yaml",
    ):
        assert sha256(out / rel) == sha256(run.run_dir / rel), rel
    assert (out / "runspec/spec.yaml").read_text() == run.spec.text
    manifest = json.loads((out / "runspec/manifest.json").read_text())
    assert {f["path"] for f in manifest["files"]} == {
        p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()
    } - {"runspec/manifest.json", "runspec/record.json"}  # neither lists itself
    assert json.loads((out / "runspec/record.json").read_text())["name"] == run.spec.name
    assert not list(out.rglob("*.partial"))
    assert run.reload().last_push == pushed


def test_unchanged_files_are_not_written_again(make_run: MakeRun) -> None:
    run = make_run("dir")
    run.epoch(2)
    pusher = run.pusher()
    assert pusher.push_now(final=False, timeout=60) is not None
    out = target_dir(run)
    best_inode = (out / "weights/best.pt").stat().st_ino
    run.epoch(3, best=False)
    pushed = pusher.push_now(final=False, timeout=60)
    assert pushed is not None and pushed.epoch == 3
    assert (out / "weights/best.pt").stat().st_ino == best_inode
    assert sha256(out / "weights/last.pt") == sha256(run.run_dir / "weights/last.pt")
    # Bytes counted: the new last.pt and the small run files, not best.pt or epoch_2.pt.
    assert (run.run_dir / "weights/last.pt").stat().st_size <= pushed.bytes < 2 * 12_000_000
    # The line says the bytes the push holds (the weights'), then what went this time.
    manifest = json.loads((out / "runspec/manifest.json").read_text())
    held = format_bytes(sum(entry["size"] for entry in manifest["files"]))
    line = [line for line in run.lines if line.startswith("pushed epoch 3 ")][-1]
    said = rf"{len(pushed.files)} files, {held} \(\d+ sent, {format_bytes(pushed.bytes)}\) in "
    assert re.search(said, line), line


def test_truncated_last_pt_never_reaches_the_volume(make_run: MakeRun) -> None:
    run = make_run("dir")
    run.epoch(1)
    pusher = run.pusher()
    assert pusher.push_now(final=False, timeout=60) is not None
    good = sha256(run.run_dir / "weights/last.pt")
    run.epoch(2)
    last = run.run_dir / "weights/last.pt"
    last.write_bytes(last.read_bytes()[:1000])
    assert pusher.push_now(final=True, timeout=60) is not None
    assert sha256(target_dir(run) / "weights/last.pt") == good


def test_unwritable_volume_fails_then_catches_up(make_run: MakeRun) -> None:
    run = make_run("dir")
    run.epoch(1)
    out = target_dir(run)
    out.parent.mkdir(parents=True)
    out.write_text("not a folder: the volume is not what we expect")
    pusher = run.pusher(retry_base=10.0)
    pusher.notify_checkpoint()
    wait_until(lambda: run.reload().push_error is not None, 60, "the failed push", run)
    assert run.reload().last_push is None
    out.unlink()
    run.clock.advance(11)
    wait_until(lambda: run.reload().last_push is not None, 60, "the retried push", run)
    assert sha256(out / "weights/last.pt") == sha256(run.run_dir / "weights/last.pt")
    assert run.reload().push_error is None


def test_verify_rehashes_what_was_written(tmp_path: Path) -> None:
    local = tmp_path / "staged" / "weights" / "last.pt"
    local.parent.mkdir(parents=True)
    local.write_bytes(b"x" * 5000)
    d = digest_file(local)
    entry = ManifestEntry("weights/last.pt", d.size, d.sha256, 1, "t", d.blob_id)
    target = DirTarget(tmp_path / "vol", "run")
    item = StagedFile(entry, local)
    target.push([item], "epoch 1")
    assert target.verify(None, [entry], [item]) == []
    # The volume hands back other bytes than were written (a bad disk, a stale mount).
    copy = tmp_path / "vol" / "run" / "weights" / "last.pt"
    copy.write_bytes(b"y" * 5000)
    problems = target.verify(None, [entry], [item])
    assert len(problems) == 1 and "weights/last.pt" in problems[0]
    shutil.rmtree(tmp_path / "vol")
    assert target.verify(None, [entry], []) != []


def test_the_summary_counts_the_bytes_the_push_holds_not_its_last_commits(
    make_run: MakeRun,
) -> None:
    run = make_run("dir")
    run.epoch(2)
    pusher = run.pusher()
    assert pusher.push_now(final=False, timeout=60) is not None
    run.epoch(3, best=False)
    pushed = pusher.push_now(final=True, timeout=60)
    assert pushed is not None and pushed.final
    manifest = json.loads((target_dir(run) / "runspec/manifest.json").read_text())
    held = sum(entry["size"] for entry in manifest["files"])
    assert pushed.bytes < held  # best.pt and epoch_2.pt went out the first time only
    lines = summary_lines(run.spec, run.paths, run.reload())
    [line] = [line for line in lines if "verified final push" in line]
    assert f", {format_bytes(held)} to dir " in line, line
