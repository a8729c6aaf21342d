"""Any file name a filesystem allows, through a real daemon: 255 bytes long, bytes that are not
UTF-8, newlines, terminal escapes, leading dashes. Each valid spec is queued, each invalid one
rejected with a `.error` (0600) that shows odd characters escaped, and nothing stays behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.fixtures_daemon import DaemonProc, spec_text, wait_until

NAME_MAX = 255


def _drop(inbox: Path, name: bytes, text: str) -> None:
    """Write under a temporary name, then rename in: the bytes of `name` exactly."""
    tmp = os.path.join(os.fsencode(inbox), b".drop.tmp")
    with open(tmp, "wb") as fh:
        fh.write(text.encode())
    os.rename(tmp, os.path.join(os.fsencode(inbox), name))


def _accepted(daemon: DaemonProc, run: str) -> bool:
    return (daemon.state / "jobs" / run / "record.json").exists()


def _errors(daemon: DaemonProc) -> list[bytes]:
    rejected = os.fsencode(daemon.inbox / "rejected")
    try:
        return sorted(n for n in os.listdir(rejected) if n.endswith(b".error"))
    except FileNotFoundError:
        return []


def _nothing_left_behind(daemon: DaemonProc) -> None:
    assert [n for n in os.listdir(os.fsencode(daemon.inbox)) if n != b"rejected"] == []
    assert os.listdir(daemon.state / "claimed") == []


NAMES = {
    "longest": b"a" * (NAME_MAX - 5) + b".yaml",
    "longest-multibyte": "é".encode() * 125 + b".yaml",
    "not-utf8": b"\xff\xfe-latin1-\xe9t\xe9.yaml",
    "newline": b"two\nlines.yaml",
    "terminal-escape": b"\x1b[2J\x1b[31mred.yaml",
    "bidi-override": "evil\u202elmay.yaml".encode(),
    "leading-dash": b"-rf --no-preserve-root.yml",
}


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_any_name_is_queued_when_valid_and_rejected_readably_when_not(
    make_daemon, kind: str
) -> None:  # type: ignore[no-untyped-def]
    name = NAMES[kind]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    run = f"name-{kind}"
    _drop(daemon.inbox, name, spec_text(run))
    wait_until(lambda: _accepted(daemon, run), timeout=20, what="the valid spec's run")
    assert (daemon.state / "jobs" / run / "spec.yaml").read_text() == spec_text(run)

    _drop(daemon.inbox, name, "runspec: 1\nname: bad\nbogus: 1\n")
    wait_until(lambda: len(_errors(daemon)) == 1, timeout=20, what="the rejection's .error")
    error = os.path.join(os.fsencode(daemon.inbox / "rejected"), _errors(daemon)[0])
    assert len(os.path.basename(error)) <= NAME_MAX
    assert stat.S_IMODE(os.stat(error).st_mode) == 0o600
    text = Path(os.fsdecode(error)).read_bytes().decode("utf-8")  # the .error is UTF-8
    lines = text.splitlines()
    assert len(lines) == 4, lines  # one line per problem: no name breaks a line
    assert all(line.isprintable() for line in lines), lines
    assert "unknown key 'bogus'" in text
    rejected = [
        n for n in os.listdir(os.fsencode(daemon.inbox / "rejected")) if n != _errors(daemon)[0]
    ]
    assert len(rejected) == 1
    assert len(rejected[0]) <= NAME_MAX - len(".error")
    _nothing_left_behind(daemon)
    # The daemon's own output shows the name escaped, never raw.
    wait_until(lambda: "rejected " in daemon.output, timeout=10, what="the rejection line")
    raw = daemon.out.read_bytes()
    assert b"\x1b" not in raw and b"\xff" not in raw and "\u202e".encode() not in raw


def test_an_escaped_name_reads_as_the_bytes_on_disk(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon().start()
    daemon.wait_ready()
    _drop(daemon.inbox, b"x\xff\x1b[1m\nz.yaml", "runspec: 1\n")
    wait_until(lambda: len(_errors(daemon)) == 1, timeout=20, what="the .error")
    error = Path(
        os.fsdecode(os.path.join(os.fsencode(daemon.inbox / "rejected"), _errors(daemon)[0]))
    )
    first = error.read_text().splitlines()[0]
    assert first.startswith("x\\xff\\x1b[1m\\nz.yaml:1:1: /budget: missing required key 'budget'")
