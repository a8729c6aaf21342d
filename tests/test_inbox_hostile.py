"""The inbox of a real daemon against hostile and careless files: FIFOs, links, huge files, a
replaced `rejected/` folder and a writer still writing. Each ends queued, whole, or rejected
with a reason, and the daemon keeps answering."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
from watchdog.events import FileOpenedEvent, FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from runspec.spec.yamlload import MAX_BYTES
from tests.fixtures_daemon import DaemonProc, drop, spec_text, wait_until

RSS_BOUND = 150e6  # far above the daemon's own ~40 MB, far below reading /dev/zero for a second


def _accepted(daemon: DaemonProc, name: str) -> bool:
    return (daemon.state / "jobs" / name / "record.json").exists()


def _rchar(daemon: DaemonProc) -> int:
    """Bytes the daemon has read so far, through any read call (the kernel's own count)."""
    assert daemon.proc is not None
    io = Path(f"/proc/{daemon.proc.pid}/io").read_text()
    return int(next(line.split()[1] for line in io.splitlines() if line.startswith("rchar:")))


def _rss(daemon: DaemonProc) -> float:
    assert daemon.proc is not None
    return float(psutil.Process(daemon.proc.pid).memory_info().rss)


def _rejected(daemon: DaemonProc, name: str, *, bounded_rss: bool = False) -> str:
    """Wait for `name`'s rejection; the .error text (checked to be 0600)."""
    error = daemon.inbox / "rejected" / f"{name}.error"

    def done() -> bool:
        if bounded_rss:
            assert _rss(daemon) < RSS_BOUND, f"the daemon's RSS grew to {_rss(daemon) / 1e6:.0f} MB"
        return error.exists()

    wait_until(done, timeout=20, what=f"the rejection of {name}")
    assert stat.S_IMODE(error.stat().st_mode) == 0o600
    return error.read_text()


def _still_answering(daemon: DaemonProc, name: str) -> None:
    daemon.notify.messages.clear()
    daemon.notify.wait_for("WATCHDOG=1", timeout=10)
    drop(daemon.inbox, f"{name}.yaml", spec_text(name))
    wait_until(lambda: _accepted(daemon, name), timeout=20, what=f"the run {name}")


def test_fifo_is_rejected_and_the_daemon_keeps_answering(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    os.mkfifo(daemon.inbox / "pipe.yaml")
    text = _rejected(daemon, "pipe.yaml")
    assert "pipe.yaml:1:1: a FIFO (named pipe), not a regular file" in text
    assert stat.S_ISFIFO(os.lstat(daemon.inbox / "rejected" / "pipe.yaml").st_mode)
    _still_answering(daemon, "after-fifo")


def test_symlink_to_dev_zero_is_rejected_without_reading_it(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    before = _rchar(daemon)
    os.symlink("/dev/zero", daemon.inbox / "zero.yaml")
    text = _rejected(daemon, "zero.yaml", bounded_rss=True)
    assert "a symbolic link (to /dev/zero), not a regular file" in text
    moved = daemon.inbox / "rejected" / "zero.yaml"
    assert moved.is_symlink() and os.readlink(moved) == "/dev/zero"
    assert _rchar(daemon) - before < MAX_BYTES
    assert _rss(daemon) < RSS_BOUND
    _still_answering(daemon, "after-zero")


def test_a_1gib_file_is_refused_after_at_most_the_limit_read(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    big = daemon.inbox / ".big.yaml.tmp"
    with big.open("wb") as fh:
        fh.truncate(1 << 30)  # sparse: costs no disk
    before = _rchar(daemon)
    os.replace(big, daemon.inbox / "big.yaml")
    text = _rejected(daemon, "big.yaml", bounded_rss=True)
    assert "the file is 1,073,741,824 bytes; a spec may be at most 1 MiB" in text
    assert _rchar(daemon) - before <= MAX_BYTES + 1 + 256 * 1024  # the loop's own reads too
    assert (daemon.inbox / "rejected" / "big.yaml").stat().st_size == 1 << 30


def test_an_oversized_file_still_being_written_is_read_no_further_than_the_limit(
    make_daemon,
) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    before = _rchar(daemon)
    with (daemon.inbox / "grows.yaml").open("wb") as fh:
        for _ in range(8):
            fh.write(b"# " + b"x" * (512 * 1024) + b"\n")
            fh.flush()
    text = _rejected(daemon, "grows.yaml", bounded_rss=True)
    assert "a spec may be at most 1 MiB" in text
    assert _rchar(daemon) - before <= MAX_BYTES + 1 + 256 * 1024


class _Opens(FileSystemEventHandler):
    def __init__(self) -> None:
        self.opened: list[str] = []

    def on_any_event(self, event: FileSystemEvent) -> None:
        if isinstance(event, FileOpenedEvent):
            self.opened.append(os.fsdecode(event.src_path))


def test_symlink_to_a_secret_outside_the_inbox_is_never_followed(
    make_daemon, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o700)
    secret = outside / "shadow"
    marker = "s3cr3t-Marker-not-for-any-eyes"
    secret.write_text("".join(f"user{i}:{marker}{i}:19000:0:99999:7:::\n" for i in range(5)))
    os.chmod(secret, 0o600)
    opens = _Opens()
    watcher = Observer()
    watcher.schedule(opens, str(outside), recursive=False)
    watcher.start()
    try:
        daemon: DaemonProc = make_daemon().start()
        daemon.wait_ready()
        os.symlink(secret, daemon.inbox / "shadow.yaml")
        text = _rejected(daemon, "shadow.yaml")
        _still_answering(daemon, "after-shadow")
        time.sleep(0.5)  # let the watcher deliver any open of the secret
    finally:
        watcher.stop()
        watcher.join(timeout=10)
    assert opens.opened == [], "the daemon opened the link's target"
    assert f"a symbolic link (to {secret}), not a regular file" in text
    assert (daemon.inbox / "rejected" / "shadow.yaml").is_symlink()
    assert marker not in daemon.output
    for folder in (daemon.inbox, daemon.state):
        for root, _, files in os.walk(folder):
            for name in files:
                path = Path(root) / name
                if path.is_file() and not path.is_symlink():
                    assert marker.encode() not in path.read_bytes(), path


def test_a_rejected_folder_that_is_a_symlink_is_never_written_through(
    make_daemon, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = tmp_path / "runspecd.yaml"
    config.write_text("rescan_every: 1s\n")
    os.chmod(config, 0o600)
    daemon: DaemonProc = make_daemon(config=config).start()
    daemon.wait_ready()
    os.symlink(elsewhere, daemon.inbox / "rejected")
    drop(daemon.inbox, "bad.yaml", "runspec: 1\nname: bad\nbogus: 1\n")
    daemon.notify.wait_for("rejected/ is a symbolic link", timeout=20)
    wait_until(lambda: "is a symbolic link" in daemon.output, timeout=10, what="the log's warning")
    time.sleep(1.5)
    assert list(elsewhere.iterdir()) == []
    assert not _accepted(daemon, "bad")
    # The daemon goes on accepting good specs meanwhile.
    drop(daemon.inbox, "good.yaml", spec_text("good"))
    wait_until(lambda: _accepted(daemon, "good"), timeout=20, what="the good run")
    # Once the link is gone the held rejection lands in a real rejected/ folder of its own.
    (daemon.inbox / "rejected").unlink()
    error = daemon.inbox / "rejected" / "bad.yaml.error"
    wait_until(error.exists, timeout=20, what="the held rejection")
    assert not (daemon.inbox / "rejected").is_symlink()
    assert "unknown key 'bogus'" in error.read_text()
    assert list(elsewhere.iterdir()) == []


_SLOW_WRITER = """
import sys, time
lines = sys.stdin.read().splitlines(keepends=True)
with open(sys.argv[1], "w") as fh:  # in place, like `cat > inbox/x.yaml` from a slow source
    for line in lines:
        fh.write(line)
        fh.flush()
        time.sleep(float(sys.argv[2]))
"""


def test_a_slow_in_place_writer_is_taken_whole(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    # 23 lines; every prefix from line 13 on is itself a valid spec, the finish section last.
    text = (
        spec_text("slowly").replace("finish:\n  action: none\n", "")
        + "description: written one line at a time\n"
        + "env:\n  OMP_NUM_THREADS: 1\n  MKL_NUM_THREADS: 1\n  MALLOC_ARENA_MAX: 2\n"
        + "finish:\n"
        + "  action: command\n"
        + "  command: [/bin/true, finish-was-read]\n"
        + "  unverified: keep\n"
    )
    assert text.count("\n") == 23
    writer = subprocess.run(
        [sys.executable, "-c", _SLOW_WRITER, str(daemon.inbox / "slowly.yaml"), "0.43"],
        input=text,
        text=True,
        timeout=60,
        check=True,
    )
    assert writer.returncode == 0
    wait_until(lambda: _accepted(daemon, "slowly"), timeout=20, what="the run's record")
    assert (daemon.state / "jobs" / "slowly" / "spec.yaml").read_text() == text
    assert not (daemon.inbox / "rejected").exists()


def test_a_claimed_folder_that_is_a_symlink_is_never_written_through(
    make_daemon, daemon_dirs, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    state, inbox = daemon_dirs
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, state / "claimed")
    config = tmp_path / "runspecd.yaml"
    config.write_text("rescan_every: 1s\n")
    os.chmod(config, 0o600)
    daemon: DaemonProc = make_daemon(config=config).start()
    status = daemon.wait_ready()
    assert "claimed/ is a symbolic link, not the daemon's own folder" in status
    drop(inbox, "waits.yaml", spec_text("waits"))
    os.mkfifo(inbox / "pipe.yaml")  # needs no claim: rejected where it lies
    _rejected(daemon, "pipe.yaml")
    time.sleep(1.5)
    assert (inbox / "waits.yaml").exists(), "a spec is never claimed through a link"
    assert list(elsewhere.iterdir()) == []
    assert not _accepted(daemon, "waits")
    (state / "claimed").unlink()
    wait_until(lambda: _accepted(daemon, "waits"), timeout=20, what="the run once claimed/ is real")
    assert list(elsewhere.iterdir()) == []
    assert (state / "claimed").is_dir() and not (state / "claimed").is_symlink()


def test_a_spec_whose_handling_raises_is_rejected_with_the_reason(make_daemon, daemon_dirs) -> None:  # type: ignore[no-untyped-def]
    state, inbox = daemon_dirs
    (state / "runs").mkdir()
    (state / "runs" / "boom").write_text("not a folder\n")  # accepting `boom` raises OSError
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    drop(inbox, "boom.yaml", spec_text("boom"))
    text = _rejected(daemon, "boom.yaml")
    assert text.startswith("boom.yaml:1:1: runspec could not queue it (NotADirectoryError")
    assert os.listdir(state / "claimed") == []
    assert not (inbox / "boom.yaml").exists()
    _still_answering(daemon, "after-boom")
