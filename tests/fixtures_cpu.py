"""A slower machine, for the tests whose trainer runs until a budget, a deadline or a signal
ends it: what they check is the end, not the epochs on the way there, and at full speed each
burns a core for its whole budget (a minute and more) that the suite's other tests wait for
(it is bound by its two cores' CPU: bench/suite_cpu.py).

`cpu_cap.hold(pid)` puts a process the test started, and every process it starts from then on
(the trainer, the ranks, the finish; detached ones too), into a CPU cgroup of its own;
`cpu_cap.limit(share)` then caps them all at `share` of one core together, as a slower machine
would run them. The cap comes after the run's start (its imports are most of a short run's
CPU), once the test has seen training under way. Where no cgroup can be made (no cgroupfs
mounted read-write), the processes run uncapped: slower for the suite, the same for the test.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

_V1 = Path("/sys/fs/cgroup/cpu")  # cgroup v1's cpu controller
_V2 = Path("/sys/fs/cgroup")  # the unified hierarchy
_PERIOD_US = 100_000


class CpuCap:
    def __init__(self, group: Path | None, v2: bool) -> None:
        self.group = group
        self.v2 = v2

    def hold(self, pid: int) -> None:
        """Move the process into the group (its children follow it from then on)."""
        if self.group is not None:
            (self.group / "cgroup.procs").write_text(str(pid))

    def limit(self, share: float) -> None:
        """Cap everything in the group at `share` of one core."""
        if self.group is None:
            return
        quota = max(1000, int(share * _PERIOD_US))
        if self.v2:
            (self.group / "cpu.max").write_text(f"{quota} {_PERIOD_US}")
        else:
            (self.group / "cpu.cfs_period_us").write_text(str(_PERIOD_US))
            (self.group / "cpu.cfs_quota_us").write_text(str(quota))

    def pids(self) -> list[int]:
        if self.group is None:
            return []
        return [int(p) for p in (self.group / "cgroup.procs").read_text().split()]

    def release(self) -> None:
        """Uncap what is left (the test's own teardown ends it) and remove the group."""
        if self.group is None:
            return
        parent = self.group.parent / "cgroup.procs"
        for pid in self.pids():
            with contextlib.suppress(OSError):  # it ended meanwhile
                parent.write_text(str(pid))
        with contextlib.suppress(OSError):
            self.group.rmdir()


def _make_group(name: str) -> CpuCap:
    if (_V1 / "cgroup.procs").exists():
        candidates = [(_V1, False)]
    elif (_V2 / "cgroup.controllers").exists():
        # Under this process's own group, so what counts its CPU (bench/suite_cpu.py) still
        # counts the capped processes; where that group holds processes itself, v2 gives it
        # no controllers for children, and the test runs uncapped.
        own = Path("/proc/self/cgroup").read_text().split("0::", 1)[-1].strip()
        candidates = [(_V2 / own.lstrip("/"), True)]
    else:
        candidates = []
    for root, v2 in candidates:
        group = root / name
        try:
            group.mkdir()
            if v2 and not (group / "cpu.max").exists():
                group.rmdir()  # the cpu controller is not delegated here
                continue
        except OSError:
            continue
        return CpuCap(group, v2)
    return CpuCap(None, False)


@pytest.fixture
def cpu_cap(request: pytest.FixtureRequest) -> Iterator[CpuCap]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    cap = _make_group(f"runspec-test-{worker}-{os.getpid()}-{id(request.node)}")
    try:
        yield cap
    finally:
        cap.release()
