"""A property-based test of a real daemon's inbox: random bytes under random names, as random
kinds of file (regular, FIFO, links into and out of the inbox, hard links, folders, slow and
interrupted writers). Each file ends queued, whole, or rejected with a reason; the daemon
answers a valid spec afterwards; nothing outside the inbox and the state folder is opened.

One daemon serves every example (starting one costs seconds); a few examples a run, the same
ones every run (derandomized), so the suite stays short and reproducible.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from watchdog.events import FileOpenedEvent, FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from runspec.printable import printable
from tests.fixtures_daemon import DaemonProc, drop, end_leftovers, spec_text, wait_until

KINDS = ("regular", "fifo", "link-out", "link-in", "hardlink-out", "folder", "slow", "killed")
WRITER = """
import sys, time
data = sys.stdin.buffer.read()
step = max(1, len(data) // 6)
with open(sys.argv[1], "wb") as fh:
    for i in range(0, len(data), step):
        fh.write(data[i : i + step])
        fh.flush()
        time.sleep(float(sys.argv[2]))
"""


class _Opens(FileSystemEventHandler):
    def __init__(self) -> None:
        self.opened: list[str] = []

    def on_any_event(self, event: FileSystemEvent) -> None:
        if isinstance(event, FileOpenedEvent):
            self.opened.append(os.fsdecode(event.src_path))


@dataclass
class Bench:
    daemon: DaemonProc
    outside: Path
    secret: Path
    written: tuple[int, int]
    opens: _Opens


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    tmp = tmp_path_factory.mktemp("fuzz")
    state, inbox, outside = tmp / "state", tmp / "inbox", tmp / "outside"
    for folder in (state, inbox, outside):
        folder.mkdir(mode=0o700)
    secret = outside / "secret.yaml"
    secret.write_text(spec_text("outside-secret") + "# do-not-read-me\n")
    # Its size and mtime say it was not written; reading it here would count as an open.
    written = (secret.stat().st_size, secret.stat().st_mtime_ns)
    opens = _Opens()
    watcher = Observer()
    watcher.schedule(opens, str(outside), recursive=False)
    watcher.start()
    daemon = DaemonProc(tmp, state, inbox, None).start()
    try:
        daemon.wait_ready()
        yield Bench(daemon, outside, secret, written, opens)
    finally:
        watcher.stop()
        watcher.join(timeout=10)
        daemon.stop()
        daemon.notify.close()
        end_leftovers(state)


_counter = itertools.count()
names = st.binary(min_size=1, max_size=60).map(
    lambda raw: raw.replace(b"/", b"_").replace(b"\0", b"_").lstrip(b".") or b"x"
)
contents = st.one_of(st.binary(max_size=3000), st.just(b"valid"), st.just(b"valid"))
drops = st.lists(
    st.tuples(st.sampled_from(KINDS), names, contents, st.sampled_from([b".yaml", b".yml"])),
    min_size=1,
    max_size=4,
)


@dataclass
class Dropped:
    kind: str
    name: bytes
    run: str | None  # the run a valid spec becomes
    text: bytes


def _make(bench: Bench, kind: str, raw: bytes, content: bytes, suffix: bytes) -> Dropped:
    n = next(_counter)
    name = raw[:180] + f"-{n}".encode() + suffix
    inbox = os.fsencode(bench.daemon.inbox)
    path = os.path.join(inbox, name)
    run = f"fuzz{n}" if content == b"valid" else None
    text = spec_text(run).encode() if run else content
    if kind == "regular":
        tmp = os.path.join(inbox, b".fuzz.tmp")
        with open(tmp, "wb") as fh:
            fh.write(text)
        os.rename(tmp, path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-out":
        os.symlink(bench.secret, path)
    elif kind == "hardlink-out":
        os.link(bench.secret, path)
    elif kind == "link-in":
        target = os.path.join(inbox, b".target-" + str(n).encode())
        with open(target, "wb") as fh:
            fh.write(text)
        os.symlink(target, path)
    elif kind == "folder":
        os.mkdir(path)
    else:  # a writer in place, slow; or killed halfway through
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, os.fsdecode(path), "0.1"], stdin=subprocess.PIPE
        )
        assert writer.stdin is not None
        writer.stdin.write(text)
        writer.stdin.close()
        if kind == "killed":
            time.sleep(0.25)
            writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        if kind == "killed":
            run = None  # whatever half it wrote: queued if valid, else rejected
    return Dropped(kind, name, run, text)


def _errors(bench: Bench) -> list[str]:
    rejected = bench.daemon.inbox / "rejected"
    if not rejected.is_dir():
        return []
    return [p.read_text() for p in rejected.iterdir() if p.name.endswith(".error")]


def _ended(bench: Bench, item: Dropped, errors: list[str]) -> bool:
    if item.run and (bench.daemon.state / "jobs" / item.run / "record.json").exists():
        return True
    shown = printable(os.fsdecode(item.name)) + ":"
    return any(text.startswith(shown) for text in errors) or (
        item.kind == "killed" and _accepted_from(bench, item)
    )


def _accepted_from(bench: Bench, item: Dropped) -> bool:
    shown = printable(os.fsdecode(item.name))
    jobs = bench.daemon.state / "jobs"
    return any(
        json.loads((job / "provenance.json").read_text()).get("inbox_file") == shown
        for job in jobs.glob("*")
        if (job / "provenance.json").exists()
    )


@settings(
    max_examples=int(os.environ.get("INBOX_FUZZ_EXAMPLES", "8")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(drops)
def test_every_file_ends_queued_or_rejected_and_the_daemon_still_answers(
    bench: Bench, batch: list[tuple[str, bytes, bytes, bytes]]
) -> None:
    dropped = [_make(bench, *spec) for spec in batch]
    for item in dropped:
        event(f"kind: {item.kind}")  # shown by --hypothesis-show-statistics
    wait_until(
        lambda: all(_ended(bench, item, _errors(bench)) for item in dropped),
        timeout=30,
        what=f"an end for each of {[(d.kind, d.name) for d in dropped]}",
    )
    for item in dropped:
        if item.run and item.kind != "killed":
            if item.kind in ("regular", "slow"):
                spec = bench.daemon.state / "jobs" / item.run / "spec.yaml"
                assert spec.read_bytes() == item.text  # whole, never a prefix
            else:  # links, FIFOs, folders: never taken, whatever they point at
                assert not (bench.daemon.state / "jobs" / item.run).exists()
    # Nothing waits in the inbox (but the link targets the test made) or in claimed/.
    left = [n for n in os.listdir(bench.daemon.inbox) if n != "rejected"]
    assert all(n.startswith(".target-") for n in left), left
    # A claim is cleared just after its run's record is written: allow that instant.
    claimed = bench.daemon.state / "claimed"
    wait_until(lambda: os.listdir(claimed) == [], timeout=10, what="an empty claimed/")
    # The daemon answers a valid spec, and never opened anything outside its folders.
    probe = f"probe{next(_counter)}"
    drop(bench.daemon.inbox, f"{probe}.yaml", spec_text(probe))
    wait_until(
        (bench.daemon.state / "jobs" / probe / "record.json").exists,
        timeout=20,
        what="the probe spec's run",
    )
    assert bench.opens.opened == []
    assert (bench.secret.stat().st_size, bench.secret.stat().st_mtime_ns) == bench.written
    assert os.listdir(bench.outside) == [bench.secret.name]
    assert bench.daemon.proc is not None
    assert psutil.Process(bench.daemon.proc.pid).memory_info().rss < 150e6
