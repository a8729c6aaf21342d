"""The daemon's one stream, read as the journal reads it: every line with its priority
(sd-daemon's `<N>` prefix) when its output is the journal's stream, no timestamp of its own;
the logging format only with -v. (tests/system/ checks the same under a real systemd.)"""

from __future__ import annotations

import io
import logging
import os
import re
from functools import partial
from pathlib import Path

from runspec.voice import Stream, setup_logging
from tests.fixtures_daemon import DaemonProc, drop, spec_text, wait_until


def _journal_like(daemon: DaemonProc) -> dict[str, str]:
    """JOURNAL_STREAM naming the daemon's output file, as systemd names its stream."""
    daemon.out.touch()
    st = os.stat(daemon.out)
    return {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}


def _no_specs(inbox: Path) -> bool:
    return not list(inbox.glob("*.yaml"))


def _failing(daemon: DaemonProc) -> None:
    drop(daemon.inbox, "gpu-run.yaml", spec_text("gpu-run").replace("device: cpu", "device: 0"))
    drop(daemon.inbox, "bad.yaml", spec_text("bad") + "bogus: 1\n")


def test_under_the_journal_each_line_carries_its_priority(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: DaemonProc = make_daemon()
    _failing(daemon)
    daemon.start("--once", env=_journal_like(daemon))
    assert daemon.wait(timeout=300) == 0, daemon.output
    lines = daemon.output.splitlines()
    assert all(re.match(r"^<[0-7]>", line) for line in lines), lines
    assert "<6>runspecd: watching" in daemon.output
    for first in (
        "<3>gpu-run: FAIL  gpu: train.device: 0 needs a GPU",
        "<3>gpu-run: failed: gpu: ",
        "<4>inbox: rejected bad.yaml",
        "<3>gpu-run: summary: failed-preflight",
        "<6>gpu-run: preflight: checking this machine",
    ):
        assert any(line.startswith(first) for line in lines), (first, lines)
    # The journal stamps lines itself: none here carries a time of its own.
    assert not [line for line in lines if re.match(r"^<\d>\d{4}-\d\d-\d\d", line)], lines


def test_the_logging_format_only_with_verbose(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outputs: dict[str, str] = {}
    for how in ("plain", "verbose", "verbose-journal"):
        state = tmp_path / how
        state.mkdir(mode=0o700)
        daemon: DaemonProc = make_daemon(state=state)
        # The three share one inbox: each starts once the last one took everything from it.
        wait_until(partial(_no_specs, daemon.inbox), what="an empty inbox")
        _failing(daemon)
        env = _journal_like(daemon) if how.endswith("journal") else {}
        daemon.start("--once", *(("-v",) if how != "plain" else ()), env=env)
        assert daemon.wait(timeout=300) == 0, daemon.output
        outputs[how] = daemon.output
    stamped = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO) runspec\.", re.M)
    assert not stamped.search(outputs["plain"]), outputs["plain"]
    transition = "INFO runspec.store.state: gpu-run: queued -> preflight"
    assert re.search(rf"^\S+ \S+ {transition}", outputs["verbose"], re.M), outputs["verbose"]
    # Under the journal the debug log too goes without a time of its own, with its priority.
    assert f"<6>{transition}" in outputs["verbose-journal"]
    assert not re.search(r"^<\d>\d{4}-", outputs["verbose-journal"], re.M)
    # -v adds the log; the human lines are the same, each said once.
    for out in outputs.values():
        assert out.count("gpu-run: preflight: checking this machine") == 1, out


def test_huggingface_hubs_own_warnings_stay_out_of_the_stream_unless_verbose() -> None:
    # huggingface_hub logs a warning on each push of runspec's small files to a Xet repo
    # ("Uploading files as a binary IO buffer is not supported by Xet Storage...") and on an
    # unchanged card ("No files have been modified..."): once per push, in the lines people
    # read. runspec says what a push did; the client's own words come with -v.
    root = logging.getLogger()
    kept = (list(root.handlers), root.level, logging.getLogger("huggingface_hub").level)
    hub = logging.getLogger("huggingface_hub._commit_api")
    try:
        for verbose in (False, True):
            out = io.StringIO()
            setup_logging(Stream(out, io.StringIO(), journal=False), verbose=verbose)
            hub.warning("Uploading files as a binary IO buffer is not supported by Xet Storage.")
            hub.error("the client's own error")
            logging.getLogger("runspec.push").warning("a warning of runspec's own")
            said = out.getvalue()
            assert ("binary IO buffer" in said) is verbose, said
            assert "the client's own error" in said and "a warning of runspec's own" in said
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in kept[0]:
            root.addHandler(handler)
        root.setLevel(kept[1])
        logging.getLogger("huggingface_hub").setLevel(kept[2])
