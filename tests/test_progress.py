"""Progress a person can read: rate and ETA for downloads, extractions and pushes; a live bar
on a terminal, a line every tenth (or 30 s) anywhere else; a push under way in `status`."""

from __future__ import annotations

import io
import os
import re
import select
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path

from runspec.clock import ManualClock
from runspec.dataset import safetar
from runspec.meter import Meter
from runspec.push.base import StagedFile
from runspec.push.dirtarget import DirTarget
from runspec.store.state import RunStatus
from runspec.voice import Stream, Transient
from tests.fixtures_daemon import REPO
from tests.fixtures_push import FakeRun, MakeRun, wait_until

MB = 1_000_000


def test_lines_come_every_tenth_with_rate_and_eta_and_not_for_a_quick_transfer() -> None:
    clock = ManualClock()
    said: list[str] = []
    meter = Meter("downloading data.tar", 100 * MB, said.append, clock=clock, bar=False)
    for _ in range(100):  # 1 MB/s for 100 s
        clock.advance(1.0)
        meter.add(MB)
    meter.close()
    # A line at each tenth (none before the first few seconds), saying how fast and how long.
    assert [re.search(r"\((\d+)%\)", line).group(1) for line in said] == [  # type: ignore[union-attr]
        "10", "20", "30", "40", "50", "60", "70", "80", "90", "100",
    ]  # fmt: skip
    assert said[0] == "downloading data.tar: 10.0 MB of 100.0 MB (10%), 1.0 MB/s, ETA 1m30s"

    quick: list[str] = []
    fast = Meter("downloading small.tar", 100 * MB, quick.append, clock=clock, bar=False)
    for _ in range(10):
        clock.advance(0.1)
        fast.add(10 * MB)
    assert quick == []  # over in a second: the line saying it is done says enough


def test_a_slow_transfer_says_a_line_every_30_s() -> None:
    clock = ManualClock()
    said: list[str] = []
    meter = Meter("pushing epoch 9", 1000 * MB, said.append, clock=clock, bar=False)
    for _ in range(95):  # 0.1 MB/s: a tenth would take 1000 s
        clock.advance(1.0)
        meter.add(MB // 10)
    assert len(said) == 3 and all("ETA" in line for line in said), said


def test_no_eta_until_the_bytes_have_flowed_a_while() -> None:
    # A push's first half second: a few kilobytes of requests, the bytes of its files not yet
    # under way. A rate from that said "ETA 1h23m" for a push over in a minute.
    clock = ManualClock()
    meter = Meter("pushing epoch 3", 500 * MB, [].append, clock=clock, bar=False)
    clock.advance(0.5)
    meter.set(50_000)
    assert "ETA" not in meter.text() and "(0%)" in meter.text()
    clock.advance(2.0)  # its files' bytes go out now, at about 10 MB/s
    meter.set(20 * MB)
    assert "ETA" not in meter.text()
    clock.advance(2.0)  # bytes flowing for 4 s: the rate is the transfer's own
    meter.set(40 * MB)
    assert meter.text().endswith(", ETA 52s"), meter.text()


def _read_all(fd: int) -> str:
    """Everything written to the pty so far: a pty may hand it over in more than one read."""
    got = b""
    while select.select([fd], [], [], 0.5)[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        got += chunk
    return got.decode()


def test_a_terminal_gets_a_live_bar_that_lines_clear(tmp_path: Path) -> None:
    main, tty = os.openpty()
    out = io.StringIO()
    with os.fdopen(tty, "w") as bars:
        stream = Stream(out, bars)
        assert stream.live and not stream.journal
        clock = ManualClock()
        meter = Meter("extracting data.tar", 100 * MB, stream, clock=clock, bar=True)
        clock.advance(1.0)
        meter.add(40 * MB)
        stream("dataset tar ready")
        drawn = _read_all(main)
    os.close(main)
    assert "\r\x1b[Kextracting data.tar [########............] 40.0 MB of 100.0 MB (40%)" in drawn
    assert drawn.endswith("\r\x1b[K")  # cleared before the lasting line
    assert out.getvalue() == "dataset tar ready\n"  # the bar is never in the lasting lines
    # Not a terminal: no bar at all, anywhere.
    plain = io.StringIO()
    Stream(plain, io.StringIO())(Transient("a bar"))
    assert plain.getvalue() == ""


def test_extraction_reports_the_hashing_and_the_members(tmp_path: Path) -> None:
    tar_path = tmp_path / "d.tar"
    with tarfile.open(tar_path, "w") as tar:
        for name, size in (("d/a.bin", 3000), ("d/b.bin", 5000)):
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(b"x" * size))
    seen: dict[str, list[int]] = {}

    class Counted:
        def __init__(self, what: str, total: int) -> None:
            self.counts = seen.setdefault(f"{what} / {total}", [])

        def add(self, n: int) -> None:
            self.counts.append(n)

        def close(self) -> None:
            self.counts.append(-1)

    safetar.extract(tar_path, tmp_path / "out", meter=Counted)
    size = tar_path.stat().st_size
    assert seen.keys() == {f"checking d.tar (sha256) / {size}", "extracting d.tar / 8000"}
    assert sum(n for n in seen[f"checking d.tar (sha256) / {size}"] if n > 0) == size
    assert seen["extracting d.tar / 8000"] == [3000, 5000, -1]


class SlowDir(DirTarget):
    """A volume that takes its time: each MB written, the (manual) clock moves a second."""

    def __init__(self, run: FakeRun) -> None:
        super().__init__(run.paths.state / "pushed", run.spec.name)
        self.run = run

    def push(self, uploads: Sequence[StagedFile], message: str) -> str | None:
        sink = self.run.paths.state / "slow-sink"
        with sink.open("wb", buffering=0) as out:
            for item in uploads:
                with item.local.open("rb") as src:
                    while chunk := src.read(MB):
                        out.write(chunk)
                        self.run.clock.advance(1.0)
                        time.sleep(0.05)  # real time too: the meter looks twice a second
                        (self.run.paths.state / "written").write_text(str(out.tell()))
                        if out.tell() > 8 * MB:
                            wait_until(self.released.exists, timeout=60, what="the status read")
        return super().push(uploads, message)

    @property
    def released(self) -> Path:
        return self.run.paths.state / "go-on"


def test_a_push_under_way_shows_in_status_and_says_its_progress(make_run: MakeRun) -> None:
    run = make_run("dir")
    for status in (RunStatus.PREFLIGHT, RunStatus.STAGING, RunStatus.TRAINING):
        run.store.transition(run.record, status, "test")
    run.epoch(1)
    run.epoch(2)
    target = SlowDir(run)
    pusher = run.pusher(target=target)
    pusher.notify_checkpoint()
    written = run.paths.state / "written"
    # The file is rewritten as the bytes go: an empty read is a write under way.
    wait_until(lambda: written.exists() and int(written.read_text() or 0) > 8 * MB, 60, "8 MB")
    status = subprocess.run(
        [sys.executable, "-m", "runspec", "status", "--state", str(run.paths.state)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )
    target.released.write_text("")
    assert status.returncode == 0, status.stderr
    figures = r"^run1: pushing epoch 2: ([\d.]+) MB of ([\d.]+) MB \((\d+)%\)"
    shown = re.search(figures, status.stdout, re.M)
    assert shown, status.stdout
    done, total = float(shown.group(1)), float(shown.group(2))
    assert 0 < done < total and total >= 36  # three 12 MB checkpoints and the run files
    wait_until(lambda: run.reload().last_push is not None, timeout=120, what="the push", run=run)
    assert not run.paths.transfer_file.exists()  # over: status shows no transfer any more
    progress = [line for line in run.lines if line.startswith("pushing epoch 2: ")]
    assert progress and all(re.search(r" [kMG]?B/s", line) for line in progress), run.lines
    assert all("ETA" in line for line in progress if "(100%)" not in line), run.lines
