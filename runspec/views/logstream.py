"""A run's story as one stream in time order: runspec's own lines (`jobs/<name>/runspec.log`)
and the training's output (the run folder's `console.log`: LibreYOLO's log lines, the trainer's
own, a crash's traceback), read as they grow.

runspec.log lines start with a UTC ISO time; LibreYOLO's start with a local time
(`2026-11-30 18:09:01 | INFO     | ...`). A line without a time of its own (a traceback, a
warning printed at import) keeps the time of the line before it in its file, so a traceback
stays in one piece after the lines that led to it. `train.log` holds the same LibreYOLO lines
as console.log; it is read only where there is no console.log.
"""

from __future__ import annotations

import heapq
import json
import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from runspec.clock import parse_utc_iso, utc_iso
from runspec.store.paths import RunPaths
from runspec.trainer.control import CONSOLE_LOG

RUNSPEC = "runspec"
TRAIN = "train"

_ISO = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[+-]\d\d:\d\d|Z)) (.*)$")
_LIBREYOLO = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \| ([A-Z]+) *\| ?(.*)$")


@dataclass(frozen=True)
class Entry:
    time: float
    source: str  # RUNSPEC or TRAIN
    text: str

    def render(self) -> str:
        stamp = datetime.fromtimestamp(self.time).strftime("%Y-%m-%d %H:%M:%S")
        return f"{stamp} {self.source}: {self.text}"

    def to_json(self) -> str:
        return json.dumps({"time": utc_iso(self.time), "source": self.source, "text": self.text})


def _stamped(line: str) -> tuple[float, str] | None:
    """The time a line carries, and its text without it; None when it carries none."""
    if match := _ISO.match(line):
        try:
            return parse_utc_iso(match.group(1)), match.group(2)
        except ValueError:
            return None
    if match := _LIBREYOLO.match(line):
        try:
            when = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
        except ValueError:
            return None
        level, text = match.group(2), match.group(3)
        return when, text if level == "INFO" else f"{level} {text}"
    return None


class LogFile:
    """One log file, read from where the last read stopped; only whole lines."""

    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.source = source
        self.offset = 0
        self.partial = b""
        self.last_time: float | None = None

    def read_new(self, final: bool = False) -> list[Entry]:
        """Entries for the lines written since the last read (`final`: a last line without
        its newline counts too: the writer is gone)."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
                mtime = os.fstat(fh.fileno()).st_mtime
        except OSError:
            return []
        self.offset += len(chunk)
        data = self.partial + chunk
        lines = data.split(b"\n")
        self.partial = b"" if final else lines.pop()
        entries: list[Entry] = []
        waiting: list[str] = []  # lines before the first time this file showed
        for raw in lines:
            # A progress bar rewrites its line with \r: what a terminal would show is the last.
            text = raw.decode("utf-8", errors="replace").rstrip("\r").split("\r")[-1]
            if not text:
                continue
            stamped = _stamped(text)
            if stamped is not None:
                self.last_time, text = stamped
            if self.last_time is None:
                waiting.append(text)
                continue
            if waiting:
                entries += [Entry(self.last_time, self.source, w) for w in waiting]
                waiting = []
            entries.append(Entry(self.last_time, self.source, text))
        # A file without a single time (an old trainer crashing on import): its own mtime.
        entries += [Entry(mtime, self.source, w) for w in waiting]
        return entries


def log_files(paths: RunPaths, runspec: bool = True, training: bool = True) -> list[LogFile]:
    files = []
    if runspec:
        files.append(LogFile(paths.runspec_log, RUNSPEC))
    if training:
        console = paths.run_dir / CONSOLE_LOG
        train_log = paths.run_dir / "train.log"
        chosen = train_log if train_log.exists() and not console.exists() else console
        files.append(LogFile(chosen, TRAIN))
    return files


def read_all(files: list[LogFile], final: bool = False) -> list[Entry]:
    """What every file added since the last read, merged in time order; each file's own
    order is kept, and at equal times the earlier file in `files` goes first."""
    return list(heapq.merge(*(log.read_new(final) for log in files), key=lambda e: e.time))
