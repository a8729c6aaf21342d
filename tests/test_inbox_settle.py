"""A spec that arrives in parts never runs as a part, under the shipped unit's walls: the daemon
runs without a capability (as runspecd.service does), so it cannot read other processes' open
files; completeness comes from the writer's close and a settle time (issue 18, item 5)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from tests.fixtures_daemon import DaemonProc, spec_text, wait_until

# As runspecd.service's CapabilityBoundingSet= (empty): root, with no capability at all.
NO_CAPS = ("setpriv", "--bounding-set=-all", "--inh-caps=-all", "--")

# Every prefix that ends before `finish:` is itself a valid spec: run as a part, its finish
# would be the default, not what its author wrote.
TEXT = spec_text("parts").replace("finish:\n  action: none\n", "") + (
    "finish:\n  action: command\n  command: [/bin/true, finish-was-read]\n  unverified: keep\n"
)
CUT = TEXT.index("finish:")


def _capless(make_daemon: Callable[..., DaemonProc]) -> DaemonProc:
    daemon = make_daemon().start(wrap=NO_CAPS)
    daemon.wait_ready()
    assert "CapEff:\t0000000000000000" in Path(f"/proc/{daemon.proc.pid}/status").read_text()  # type: ignore[union-attr]
    return daemon


def _taken_whole(daemon: DaemonProc) -> None:
    spec = daemon.state / "jobs" / "parts" / "spec.yaml"
    wait_until(spec.exists, timeout=30, what="the run's record")
    assert spec.read_text() == TEXT
    assert not (daemon.inbox / "rejected").exists()


def test_a_writer_that_pauses_without_closing_is_waited_for(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon = _capless(make_daemon)
    target = daemon.inbox / "parts.yaml"
    with target.open("w") as fh:
        fh.write(TEXT[:CUT])
        fh.flush()
        time.sleep(4)  # longer than the settle time: only the missing close says "not done"
        assert target.exists(), "a spec still open for writing must not be taken"
        fh.write(TEXT[CUT:])
    _taken_whole(daemon)


def test_a_two_step_writer_is_taken_whole(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon = _capless(make_daemon)
    target = daemon.inbox / "parts.yaml"
    target.write_text(TEXT[:CUT])  # `>`: written and closed
    time.sleep(1)
    with target.open("a") as fh:  # `>>` a second later
        fh.write(TEXT[CUT:])
    _taken_whole(daemon)


def test_the_settle_time_is_the_configs(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "runspecd.yaml"
    config.write_text("inbox_settle: 6s\n")
    os.chmod(config, 0o600)
    daemon = make_daemon(config=config).start(wrap=NO_CAPS)
    daemon.wait_ready()
    target = daemon.inbox / "parts.yaml"
    target.write_text(TEXT[:CUT])
    time.sleep(4)  # past the default settle time, inside this config's
    assert target.exists(), "a part must wait out the configured settle time"
    with target.open("a") as fh:
        fh.write(TEXT[CUT:])
    _taken_whole(daemon)


def test_the_inbox_hands_control_back_between_files(tmp_path: Path) -> None:
    """The daemon pings its watchdog between the inbox's files (issue 18, item 7): thirty
    large specs at once are thirty bounded steps, not one that outlasts WatchdogSec."""
    from runspec.daemon.inbox import Inbox
    from runspec.run.accept import accept

    state, inbox_dir = tmp_path / "state", tmp_path / "inbox"
    state.mkdir(mode=0o700)
    inbox_dir.mkdir(mode=0o700)
    for i in range(30):
        bogus = "".join(f"bogus{k}: 1\n" for k in range(2000))
        (inbox_dir / f"s{i}.yaml").write_text(spec_text(f"s{i}") + bogus)
    inbox = Inbox(inbox_dir, state, accept, settle=0.5)
    handed_back: list[int] = []
    inbox.between = lambda: handed_back.append(len(list((inbox_dir / "rejected").glob("*.error"))))
    inbox.start()  # its scan finds the thirty
    try:
        time.sleep(1)  # past the settle time: all thirty are ready at the next look
        inbox.process()
    finally:
        inbox.stop()
    assert len(list((inbox_dir / "rejected").glob("*.error"))) == 30
    assert handed_back == list(range(30))  # once before each file: after the one before it
