"""A read-only state folder never kills the failsafe (issue 19.3): its fire path takes the
machine lock under /run, records nothing, and still ends the machine through the provider.

The state folder is made read-only for real: a read-only bind mount over it (this suite runs
as root), removed again at the end."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from runspec.machine import failsafe
from runspec.machine.host import FinishHost
from runspec.providers.vast import Vast
from runspec.run.accept import accept
from runspec.spec.loader import load_spec
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore, RunStatus
from tests.fixtures_providers import StandIn, VastInstance
from tests.fixtures_run import SpecWriter
from tests.test_machine_safety import trained


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """The folder read-only for real, by a read-only bind mount over it."""
    subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
    try:
        # The kernel refuses a read-only remount (EBUSY) while a file is open for writing in
        # the folder: a daemon's record save of a moment; tried again until it lands between.
        for _ in range(100):
            remount = ["mount", "-o", "remount,bind,ro", str(folder)]
            if subprocess.run(remount, capture_output=True, check=False).returncode == 0:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"{folder} stayed busy: it could not be made read-only")
        yield
    finally:
        # Lazily: a process may still hold a file open through the bind mount.
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


def test_the_failsafe_ends_the_machine_from_a_read_only_state_folder(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    layout = StateLayout(state)
    finish = {"action": "destroy", "provider": "vast", "unverified": "stop"}
    push = {"dir": str(tmp_path / "volume")}
    accept(load_spec(write_spec("stuck", finish=finish, push=push)), state)
    store = RecordStore(state)
    record = store.load("stuck")
    assert record is not None
    for status in (RunStatus.PREFLIGHT, RunStatus.STAGING, RunStatus.TRAINING):
        store.transition(record, status, "test")
    trained(layout.run_paths("stuck"), 2)  # never pushed: only a stop may end the machine

    VastInstance(standin)
    env = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "k"}
    vast = Vast(env, confirm_timeout=3.0, poll_interval=0.1)
    host = FinishHost(provider=vast, end_window=60.0, retry_base=0.2)
    said: list[str] = []
    with read_only(state):
        with pytest.raises(OSError):
            (state / "probe").write_text("x")  # the mount holds
        code = failsafe.fire(state, "stuck", host=host, progress=said.append)
    assert code == 0, said
    assert standin.made("DELETE") == [] and len(standin.made("PUT")) == 1
    assert any("the state folder is read-only" in line for line in said), said
    assert not layout.machine_file.exists()  # nothing could be recorded, and nothing was


def test_a_machine_end_a_read_only_state_folder_refused_is_still_the_one_to_apply(
    tmp_path: Path,
) -> None:
    """The idle finish arms the machine's end and then enters it through a new Endgame: with
    the state folder read-only, the armed end must not be lost between the two (the idle
    finish falls due once, and the machine would bill on)."""
    from runspec.clock import SYSTEM
    from runspec.machine.endgame import Endgame
    from runspec.machine.machinefile import Pending, save_pending
    from runspec.spec.model import FinishSpec

    state = tmp_path / "state"
    state.mkdir()
    layout = StateLayout(state)
    pending = Pending("(machine)", FinishSpec(), None, str(state / "runs"), "idle", "now")
    with read_only(state):
        with pytest.raises(OSError):
            save_pending(layout, pending, "armed", SYSTEM)
        assert Endgame(layout, say=lambda _l: None).load() == pending
    save_pending(layout, None, "applied", SYSTEM)  # writable again: written, and from the file
    assert Endgame(layout, say=lambda _l: None).load() is None
    assert layout.machine_file.is_file()
