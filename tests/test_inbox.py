"""The inbox of a real daemon process: pick-up, claim once, rejection with reasons."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from runspec.daemon.queue import arrival
from runspec.store.state import RecordStore
from tests.fixtures_daemon import DaemonProc, drop, spec_text, wait_until


def _accepted(daemon: DaemonProc, name: str) -> bool:
    return (daemon.state / "jobs" / name / "record.json").exists()


def _config(tmp_path: Path, text: str) -> Path:
    config = tmp_path / "runspecd.yaml"
    config.write_text(text)
    os.chmod(config, 0o600)
    return config


def test_renamed_in_spec_is_claimed_and_queued_with_provenance(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    drop(daemon.inbox, "first.yaml", spec_text("first"))
    wait_until(lambda: _accepted(daemon, "first"), what="the run's record")
    job = daemon.state / "jobs" / "first"
    assert (job / "spec.yaml").read_text() == spec_text("first")
    provenance = json.loads((job / "provenance.json").read_text())
    assert provenance["inbox_file"] == "first.yaml"
    assert provenance["via"] == "inbox"
    assert not (daemon.inbox / "first.yaml").exists()
    assert [p.name for p in (daemon.state / "claimed").iterdir()] == []
    assert not (daemon.inbox / "rejected").exists()


def test_spec_moved_in_from_another_folder_is_picked_up(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    elsewhere = tmp_path / "mine.yaml"
    elsewhere.write_text(spec_text("moved"))
    os.rename(elsewhere, daemon.inbox / "mine.yaml")
    wait_until(lambda: _accepted(daemon, "moved"), what="the run's record")


def test_files_present_before_start_are_picked_up(make_daemon, daemon_dirs) -> None:  # type: ignore[no-untyped-def]
    _, inbox = daemon_dirs
    drop(inbox, "early.yml", spec_text("early"))
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    wait_until(lambda: _accepted(daemon, "early"), what="the run's record")


def test_files_present_before_start_queue_in_the_order_they_were_written(
    make_daemon, daemon_dirs
) -> None:  # type: ignore[no-untyped-def]
    _, inbox = daemon_dirs
    order = ["mike", "zulu", "alpha", "quebec", "bravo"]  # neither by name nor reversed
    written = time.time() - 30
    for i, name in enumerate(order):
        path = drop(inbox, f"{name}.yaml", spec_text(name))
        os.utime(path, (written + i, written + i))
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    wait_until(lambda: all(_accepted(daemon, n) for n in order), what="all five records")
    store = RecordStore(daemon.state)
    assert [r.name for r in sorted(store.all(), key=lambda r: arrival(store, r))] == order
    # The first written is the first run out of the queue.
    wait_until(lambda: any(r.started_at for r in store.all()), what="a run to start")
    started = [r for r in store.all() if r.started_at is not None]
    assert min(started, key=lambda r: (r.started_at, arrival(store, r))).name == "mike"


def test_in_place_writer_is_waited_for(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    text = spec_text("slow")
    half = text.index("train:")
    target = daemon.inbox / "slow.yaml"
    with target.open("w") as fh:
        fh.write(text[:half])
        fh.flush()
        time.sleep(1.5)  # the half-written file sits in the inbox, open
        assert target.exists(), "a half-written spec must not be claimed"
        assert not (daemon.inbox / "rejected").exists()
        fh.write(text[half:])
    wait_until(lambda: _accepted(daemon, "slow"), what="the run's record")
    assert (daemon.state / "jobs" / "slow" / "spec.yaml").read_text() == text


def test_writer_that_never_finishes_is_rejected_as_incomplete(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon(config=_config(tmp_path, "incomplete_wait: 2s\n")).start()
    daemon.wait_ready()
    text = spec_text("stuck")
    with (daemon.inbox / "stuck.yaml").open("w") as fh:
        fh.write(text[: text.index("budget:")])
        fh.flush()
        error = daemon.inbox / "rejected" / "stuck.yaml.error"
        wait_until(error.exists, timeout=30, what="the incomplete rejection")
    lines = error.read_text().splitlines()
    assert "incomplete" in lines[0]
    assert any("/budget" in line for line in lines)
    assert not _accepted(daemon, "stuck")


def test_bad_spec_is_rejected_with_the_validation_lines(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    bad = spec_text("bad").replace("epochs: 2", "epochs: -3").replace("finish:", "finsh:")
    drop(daemon.inbox, "bad.yaml", bad)
    error = daemon.inbox / "rejected" / "bad.yaml.error"
    wait_until(error.exists, what="the .error file")
    wait_until((daemon.inbox / "rejected" / "bad.yaml").exists, what="the rejected spec")
    text = error.read_text()
    assert "bad.yaml:7:11: /train/epochs:" in text
    assert "/finsh" in text and "did you mean 'finish'" in text
    assert (daemon.inbox / "rejected" / "bad.yaml").read_text() == bad
    # The daemon goes on: the next good spec is accepted.
    drop(daemon.inbox, "good.yaml", spec_text("good"))
    wait_until(lambda: _accepted(daemon, "good"), what="the good run")


def test_two_hundred_bad_specs_at_once(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start(watchdog_usec=2_000_000)
    daemon.wait_ready()
    for i in range(200):
        (daemon.inbox / f"bad{i:03d}.yaml").write_text(f"runspec: 1\nname: bad{i}\nbogus: {i}\n")
    rejected = daemon.inbox / "rejected"
    wait_until(
        lambda: rejected.is_dir() and len(list(rejected.glob("*.error"))) == 200,
        what="200 rejections",
    )
    assert len(list(rejected.glob("*.yaml"))) == 200
    assert "unknown key 'bogus'" in (rejected / "bad123.yaml.error").read_text()
    assert not list(daemon.inbox.glob("*.yaml"))
    # Healthy: still pinging the watchdog and still accepting.
    daemon.notify.messages.clear()
    daemon.notify.wait_for("WATCHDOG=1")
    drop(daemon.inbox, "after.yaml", spec_text("after"))
    wait_until(lambda: _accepted(daemon, "after"), what="the run after the flood")


def test_ignored_names_stay_where_they_are(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    for name in (".hidden.yaml", "draft.yaml.tmp", "notes.txt"):
        (daemon.inbox / name).write_text(spec_text("ignored"))
    drop(daemon.inbox, "marker.yaml", spec_text("marker"))
    wait_until(lambda: _accepted(daemon, "marker"), what="the marker run")
    for name in (".hidden.yaml", "draft.yaml.tmp", "notes.txt"):
        assert (daemon.inbox / name).exists()
    assert not _accepted(daemon, "ignored")


def test_a_taken_name_with_another_spec_is_rejected(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    drop(daemon.inbox, "dup.yaml", spec_text("dup"))
    wait_until(lambda: _accepted(daemon, "dup"), what="the first run")
    drop(daemon.inbox, "dup2.yaml", spec_text("dup").replace("epochs: 2", "epochs: 3"))
    error = daemon.inbox / "rejected" / "dup2.yaml.error"
    wait_until(error.exists, what="the name-taken rejection")
    assert "already exists with another spec" in error.read_text()
