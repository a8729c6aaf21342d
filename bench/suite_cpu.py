"""Where the test suite's CPU goes: every test's CPU, its own processes' and all they started.

    .venv/bin/python bench/suite_cpu.py [pytest arguments]    (as root; default: the suite)

The suite is bound by its two cores (its wall time is about its CPU over two), and most of that
CPU is spent outside pytest, in `runspec run`s, daemons, trainers and preflight children that
run detached, so `time` and pytest's durations do not show it. Here each xdist worker moves
itself into a CPU-accounting cgroup of its own at its start; every process it starts stays in
it, detached ones included, so the group's usage before and after a test is that test's CPU
(a test leaves nothing running to count against the next). Not part of `make bench`: it runs
the whole suite (about 25 minutes).

Prints the total, then the files and the tests that took the most, with their wall time. The
same module is the pytest plugin (`-p suite_cpu`) that writes one JSON line per test.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOTS = (Path("/sys/fs/cgroup/cpuacct"), Path("/sys/fs/cgroup"))  # cgroup v1, then v2
OUT_ENV = "SUITE_CPU_DIR"
REPO = Path(__file__).resolve().parent.parent


class _Group:
    def __init__(self, path: Path, v2: bool) -> None:
        self.path, self.v2 = path, v2

    def usage(self) -> float:
        """CPU-seconds used by everything in the group so far."""
        if self.v2:
            for line in (self.path / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
            raise OSError(f"{self.path}/cpu.stat has no usage_usec")
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def leave(self) -> None:
        (self.path.parent / "cgroup.procs").write_text(str(os.getpid()))
        note = _note_of(self.path.name)
        if _removed(self.path):
            note.unlink()
        else:
            note.write_text((self.path / "cgroup.procs").read_text())


def _note_of(name: str) -> Path:
    """Beside the results, one file per worker's group while it stands: the runner removes
    what a worker could not (its worker ended first, or a test's processes were still in it)."""
    return Path(os.environ[OUT_ENV]) / f"{name}.group"


def _removed(group: Path) -> bool:
    """Remove the group once empty, waiting 5 s at most: a process of the last test may still
    be on its way out."""
    for _ in range(50):
        with contextlib.suppress(OSError):
            group.rmdir()
            return True
        time.sleep(0.1)
    return False


def _join(name: str) -> _Group:
    for root, v2 in ((ROOTS[0], False), (ROOTS[1], True)):
        marker = root / ("cgroup.controllers" if v2 else "cpuacct.usage")
        if not marker.exists():
            continue
        path = root / name
        path.mkdir(exist_ok=True)
        (path / "cgroup.procs").write_text(str(os.getpid()))
        return _Group(path, v2)
    raise OSError("no cpuacct (v1) or unified (v2) cgroup hierarchy under /sys/fs/cgroup")


_group: _Group | None = None
_out: Any = None


def pytest_configure(config: Any) -> None:
    global _group, _out
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None and config.getoption("numprocesses", None):
        return  # xdist's controller: its workers count
    worker = worker or "main"
    _group = _join(f"runspec-suite-cpu-{worker}-{os.getpid()}")
    _note_of(_group.path.name).write_text("")
    _out = open(Path(os.environ[OUT_ENV]) / f"{worker}.jsonl", "a", encoding="utf-8")  # noqa: SIM115


def pytest_unconfigure(config: Any) -> None:
    if _group is not None:
        _group.leave()
    if _out is not None:
        _out.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Iterator[None]:
    if _group is None:
        yield
        return
    cpu, wall, started = _group.usage(), time.monotonic(), time.time()
    yield
    row = {
        "id": item.nodeid,
        "cpu": round(_group.usage() - cpu, 2),
        "wall": round(time.monotonic() - wall, 2),
        "start": round(started, 2),
        "worker": _group.path.name,
    }
    _out.write(json.dumps(row) + "\n")
    _out.flush()


def report(rows: list[dict[str, Any]], wall: float, top: int = 25) -> None:
    cpu = sum(r["cpu"] for r in rows)
    print(f"{len(rows)} tests: {cpu:,.0f} CPU-s in {wall:,.0f} s of wall ({cpu / wall:.2f} cores)")
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        f = files[r["id"].split("::")[0]]
        f[0], f[1], f[2] = f[0] + r["cpu"], f[1] + r["wall"], f[2] + 1
    print(f"\nthe {top} files that took the most CPU (CPU-s, test wall s, tests):")
    for name, (c, w, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{c:8.1f} {w:8.1f} {n:4d}  {name}")
    print(f"\nthe {top} tests that took the most CPU (CPU-s, wall s):")
    for r in sorted(rows, key=lambda r: -r["cpu"])[:top]:
        print(f"{r['cpu']:8.1f} {r['wall']:8.1f}  {r['id']}")
    # The tail: when each worker ran out of tests, and what each ran last (a long test left
    # for the end keeps the suite waiting on one worker while the cores idle).
    first = min(r["start"] for r in rows)
    print("\neach worker's last test (s from the first test's start, CPU-s, wall s):")
    for worker in sorted({r["worker"] for r in rows}):
        last = max((r for r in rows if r["worker"] == worker), key=lambda r: r["start"] + r["wall"])
        end = last["start"] + last["wall"] - first
        print(f"{end:8.0f} {last['cpu']:8.1f} {last['wall']:8.1f}  {last['id']}")


def _cmdline(pid: str) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return f"{pid} (ended)"


def _sweep(note: Path) -> None:
    """A worker's group its worker did not remove: said when it still held a test's processes
    (with what they are, if they still run), then removed once they are out."""
    pids = note.read_text().split()
    if pids:
        shown = [_cmdline(pid) for pid in pids]
        print(f"suite_cpu: {note.stem} held {len(shown)} processes after its last test: {shown}")
    for root in ROOTS:
        group = root / note.stem
        if group.is_dir() and not _removed(group):
            print(f"suite_cpu: {group} is left: {(group / 'cgroup.procs').read_text().split()}")


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="suite-cpu-") as out:
        env = {
            **os.environ,
            OUT_ENV: out,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(REPO / "bench"), os.environ.get("PYTHONPATH")])
            ),
        }
        pytest_args = argv or ["-q", "-n", "4", "--dist", "worksteal"]  # as make test
        started = time.monotonic()
        code = subprocess.call(
            [sys.executable, "-m", "pytest", "-p", "suite_cpu", *pytest_args], cwd=REPO, env=env
        )
        wall = time.monotonic() - started
        for note in Path(out).glob("*.group"):
            _sweep(note)
        lines = [line for f in Path(out).glob("*.jsonl") for line in f.read_text().splitlines()]
        rows = [json.loads(line) for line in lines]
    if not rows:
        print("no test was measured (is this root, with a cgroup hierarchy mounted?)")
        return code or 1
    report(rows, wall)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
