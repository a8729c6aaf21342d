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

    def release(self) -> None:
        """Uncap what is left (the test's own teardown ends it) and remove the group."""
        if self.group is None:
            return
        parent = self.group.parent / "cgroup.procs"
        for pid in (self.group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # it ended meanwhile
                parent.write_text(str(pid))
        with contextlib.suppress(OSError):
            self.group.rmdir()


def _own_group() -> tuple[Path, bool] | None:
    """This process's own CPU cgroup folder, and whether it is cgroup v2; None without one.
    The cap's group goes under it: where the CPU controller shares a hierarchy with what counts
    this process's CPU (cgroup v2, or v1's cpu and cpuacct mounted together, as Docker does),
    the capped processes are still counted (bench/suite_cpu.py)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(",") and (_V1 / "cgroup.procs").exists():
            return _V1 / path.lstrip("/"), False
        if controllers == "" and (_V2 / "cgroup.controllers").exists():
            return _V2 / path.lstrip("/"), True
    return None


def _make_group(name: str) -> CpuCap:
    own = _own_group()
    if own is None:
        return CpuCap(None, False)
    parent, v2 = own
    group = parent / name
    try:
        group.mkdir()
    except OSError:
        return CpuCap(None, False)
    if v2 and not (group / "cpu.max").exists():
        # The cpu controller is not delegated here (v2 gives none to the children of a group
        # that holds processes itself).
        group.rmdir()
        return CpuCap(None, False)
    return CpuCap(group, v2)


@pytest.fixture
def cpu_cap(request: pytest.FixtureRequest) -> Iterator[CpuCap]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    cap = _make_group(f"runspec-test-{worker}-{os.getpid()}-{id(request.node)}")
    try:
        yield cap
    finally:
        cap.release()
