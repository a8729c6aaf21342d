"""runspecd's figures: idle RSS and CPU, inbox pick-up latency, RSS after 1,000 rejected specs,
and 1,000 hostile files of mixed kinds dropped at once.

    .venv/bin/python bench/bench_daemon.py [--idle-seconds 60] [--pickups 20] [--rejects 1000]
                                           [--hostile 1000]

Prints the figures; asserts nothing (goals: idle RSS <= 40 MB, idle CPU < 0.5 % of a core,
median pick-up < 50 ms; hostile files all answered with the peak RSS still < 60 MB and no file
read past the 1 MiB limit).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from runspec.machine import watcher
from runspec.store.paths import StateLayout

REPO = Path(__file__).resolve().parent.parent


def spec(name: str) -> str:
    return (
        f"runspec: 1\nname: {name}\ndataset:\n  path: /nonexistent/data.yaml\n"
        "train: {model: yolo9-t, epochs: 1, device: cpu}\nbudget: {wall_clock: 10m}\n"
        "preflight: {matmul: false, collective: false, doctor: false}\n"
    )


def run_ns(pid: int) -> int:
    """CPU time of all the process's threads in ns (schedstat: exact, not tick-sampled)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # a thread that ended
            total += int((task / "schedstat").read_text().split()[0])
    return total


def wait_for(predicate: object, timeout: float, poll: float = 0.0005) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(poll)
    return False


def rchar(pid: int) -> int:
    """Bytes the process has read through any read call (the kernel's own count)."""
    io = Path(f"/proc/{pid}/io").read_text()
    return int(next(line.split()[1] for line in io.splitlines() if line.startswith("rchar:")))


def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    kb = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(kb) / 1000


HOSTILE_KINDS = (
    "fifo",
    "link to /dev/zero",
    "link out of the inbox",
    "1 GiB sparse file",
    "folder",
    "binary junk",
    "255-byte name",
    "non-UTF-8 name",
    "control characters in the name",
    "hard link out of the inbox",
)


def make_hostile(inbox: Path, secret: Path, i: int) -> str:
    """One hostile file, the i-th kind in turn; its kind."""
    kind = HOSTILE_KINDS[i % len(HOSTILE_KINDS)]
    name = f"h{i:04d}.yaml"
    path = inbox / name
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link to /dev/zero":
        os.symlink("/dev/zero", path)
    elif kind == "link out of the inbox":
        os.symlink(secret, path)
    elif kind == "1 GiB sparse file":
        with path.open("wb") as fh:
            fh.truncate(1 << 30)
    elif kind == "folder":
        path.mkdir()
    elif kind == "binary junk":
        path.write_bytes(os.urandom(4096))
    elif kind == "255-byte name":
        (inbox / (f"h{i:04d}-".ljust(250, "x") + ".yaml")).write_text("runspec: 1\n")
    elif kind == "non-UTF-8 name":
        with open(
            os.path.join(os.fsencode(inbox), f"h{i:04d}-\xff\xfe".encode("latin-1") + b".yaml"),
            "wb",
        ) as fh:
            fh.write(b"runspec: 1\n")
    elif kind == "control characters in the name":
        (inbox / f"h{i:04d}-\x1b[2J\n\u202e.yaml").write_text("runspec: 1\n")
    else:
        os.link(secret, path)
    return kind


def hostile(pid: int, inbox: Path, tmp: Path, count: int) -> None:
    """`count` hostile files at once: how long until each is answered (rejected with its
    .error), the daemon's peak RSS, and how much it read meanwhile."""
    outside = tmp / "outside"
    outside.mkdir(exist_ok=True)
    secret = outside / "secret.yaml"
    secret.write_text("user:not-for-the-daemon-to-read\n")
    rejected = inbox / "rejected"
    before_errors = len(list(rejected.glob("*.error"))) if rejected.is_dir() else 0
    read_before = rchar(pid)
    start = time.monotonic()
    kinds = [make_hostile(inbox, secret, i) for i in range(count)]
    made = time.monotonic() - start

    def answered() -> bool:
        return len(list(rejected.glob("*.error"))) - before_errors >= count

    # Listing thousands of files is work too: poll gently, not every half millisecond.
    ok = wait_for(answered, 300, poll=0.05)
    took = time.monotonic() - start
    read = rchar(pid) - read_before
    left = [p for p in inbox.iterdir() if p.name != "rejected"]
    sparse = kinds.count("1 GiB sparse file")
    print(
        f"{count} hostile files ({len(HOSTILE_KINDS)} kinds, made in {made:.1f} s): "
        f"{'all rejected' if ok else 'NOT all rejected'} in {took:.1f} s; "
        f"left in the inbox: {len(left)}; daemon alive: {Path(f'/proc/{pid}').exists()}"
    )
    print(
        f"  read by the daemon meanwhile: {read / 1e6:.2f} MB in all "
        f"(the {sparse} sparse files hold {sparse} GiB; limit per file 1 MiB + 1 byte); "
        f"peak RSS over the daemon's life: {peak_rss_mb(pid):.1f} MB (goal < 60)"
    )


def end_watchers(state: Path) -> None:
    """The failsafe watchers the picked-up runs armed outlive the daemon, as on a real
    machine: ended by their recorded identities, so the bench leaves nothing running."""
    layout = StateLayout(state)
    for job in sorted(layout.jobs.iterdir()) if layout.jobs.is_dir() else []:
        with contextlib.suppress(Exception):  # a folder that is no run's
            watcher.stop(layout.run_paths(job.name))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--pickups", type=int, default=20)
    parser.add_argument("--rejects", type=int, default=1000)
    parser.add_argument("--hostile", type=int, default=1000)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-runspecd-"))
    state, inbox = tmp / "state", tmp / "inbox"
    state.mkdir(mode=0o700)
    inbox.mkdir(mode=0o700)
    log = (tmp / "daemon.log").open("w")
    cmd = [sys.executable, "-m", "runspec", "daemon", "--state", str(state), "--inbox", str(inbox)]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        ps = psutil.Process(proc.pid)
        if not wait_for(lambda: "runspecd: watching" in (tmp / "daemon.log").read_text(), 60):
            print("the daemon did not start; see", tmp / "daemon.log")
            return 1
        time.sleep(2)
        cpu0 = run_ns(proc.pid)
        t0 = time.monotonic()
        time.sleep(args.idle_seconds)
        busy = (run_ns(proc.pid) - cpu0) / 1e9
        idle_cpu = 100 * busy / (time.monotonic() - t0)
        rss_idle = ps.memory_info().rss / 1e6
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        print(f"idle RSS: {rss_idle:.1f} MB (goal <= 40)")
        print(f"idle CPU: {idle_cpu:.3f} % of a core over {args.idle_seconds:.0f} s (goal < 0.5)")
        print(f"torch mapped into the daemon: {'libtorch' in maps}")

        latencies = []
        for i in range(args.pickups):
            name = f"pick{i:03d}"
            tmp_file = inbox / f".{name}.yaml.tmp"
            tmp_file.write_text(spec(name))
            record = state / "jobs" / name / "record.json"
            start = time.perf_counter()
            os.replace(tmp_file, inbox / f"{name}.yaml")
            if not wait_for(record.exists, 10):
                print(f"pick-up {name} timed out")
                continue
            latencies.append((time.perf_counter() - start) * 1000)
            time.sleep(0.2)
        if latencies:
            latencies.sort()
            p90 = latencies[int(0.9 * (len(latencies) - 1))]
            print(
                f"pick-up latency (rename -> queued record), n={len(latencies)}: median "
                f"{statistics.median(latencies):.1f} ms, p90 {p90:.1f} ms, "
                f"max {latencies[-1]:.1f} ms (goal: median < 50)"
            )

        rejected = inbox / "rejected"
        start = time.monotonic()
        for i in range(args.rejects):
            (inbox / f"bad{i:04d}.yaml").write_text(f"runspec: 1\nname: bad{i}\nbogus: 1\n")
        ok = wait_for(
            lambda: rejected.is_dir() and len(list(rejected.glob("bad*.error"))) >= args.rejects,
            300,
        )
        took = time.monotonic() - start
        print(
            f"{args.rejects} bad specs: {'all rejected' if ok else 'NOT all rejected'} in "
            f"{took:.1f} s; RSS after: {ps.memory_info().rss / 1e6:.1f} MB; "
            f"daemon alive: {proc.poll() is None}"
        )
        if args.hostile:
            hostile(proc.pid, inbox, tmp, args.hostile)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        end_watchers(state)
    print("state and log left in", tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
