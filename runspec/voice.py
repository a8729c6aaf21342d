"""What people read: one stream of human lines, each saying what it is about.

Every line runspec says to a person goes out through a `Stream`: the daemon's, `runspec run`'s
and the commands' own. A line carries how much it matters (`Said`, with sd-daemon(3)'s
priorities), so under systemd the journal files it right and `journalctl -p warning` shows the
failed checks and pushes, while a terminal gets plain text. A `Transient` line is a progress
bar: redrawn in place on a terminal, dropped anywhere else (its caller says the lasting lines).

Logging records are for debugging. With `-v` they come in the logging format; without it only
warnings and errors come, as human lines like the rest. Under the journal no line carries a
timestamp of its own: the journal stamps each one.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from typing import TextIO

from runspec.clock import SYSTEM, Clock, utc_iso
from runspec.printable import PrintableFormatter, printable
from runspec.secrets import redact

# sd-daemon(3): the prefixes the journal reads at the start of a line.
ERROR = 3
WARNING = 4
NOTICE = 5
INFO = 6
DEBUG = 7

_LOG_PRIORITY = {
    logging.CRITICAL: 2,
    logging.ERROR: ERROR,
    logging.WARNING: WARNING,
    logging.INFO: INFO,
    logging.DEBUG: DEBUG,
}
VERBOSE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
JOURNAL_VERBOSE_FORMAT = "%(levelname)s %(name)s: %(message)s"


class Said(str):
    """A line for people that carries its priority; a plain str is INFO."""

    priority: int

    def __new__(cls, text: str, priority: int = INFO) -> Said:
        said = super().__new__(cls, text)
        said.priority = priority
        return said


class Transient(Said):
    """A progress bar's current text: redrawn in place on a terminal, never kept in a log."""


def error(text: str) -> Said:
    return Said(text, ERROR)


def warning(text: str) -> Said:
    return Said(text, WARNING)


def notice(text: str) -> Said:
    return Said(text, NOTICE)


def priority_of(text: str) -> int:
    return text.priority if isinstance(text, Said) else INFO


def like(text: str, new: str) -> str:
    """`new`, with the priority (and transience) `text` had."""
    if isinstance(text, Transient):
        return Transient(new, text.priority)
    if isinstance(text, Said):
        return Said(new, text.priority)
    return new


def tagged(tag: str, text: str) -> list[str]:
    """Each line of `text` as `tag: line`, keeping its priority: a block of lines (a
    preflight report) says on every line which run it is about."""
    return [like(text, f"{tag}: {line}") for line in text.splitlines() or [""]]


def on_journal(stream: TextIO) -> bool:
    """True when `stream` is connected to the journal (JOURNAL_STREAM names its device and
    inode, as systemd.exec(5) says); a redirected stream of a process started under systemd
    is not."""
    expected = os.environ.get("JOURNAL_STREAM", "")
    if not expected:
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return expected == f"{st.st_dev}:{st.st_ino}"


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError, AttributeError):
        return False


class Stream:
    """Where human lines go: one file, escaped, with the journal's priority prefix when the
    file is the journal, or as JSON lines. A live bar (a `Transient`) goes to `bars`, only
    when that is a terminal."""

    def __init__(
        self,
        out: TextIO | None = None,
        bars: TextIO | None = None,
        *,
        json_lines: bool = False,
        journal: bool | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        self.out = out or sys.stdout
        self.bars = bars or sys.stderr
        self.json_lines = json_lines
        self.journal = on_journal(self.out) if journal is None else journal
        self.live = not self.journal and not json_lines and _isatty(self.bars)
        self.clock = clock
        self._bar = False
        self._lock = threading.Lock()

    def __call__(self, text: str) -> None:
        if isinstance(text, Transient):
            self._draw(text)
            return
        with self._lock:
            self._clear_bar()
            for line in text.splitlines() or [""]:
                self.out.write(self._render(line, priority_of(text)) + "\n")
            self.out.flush()

    def _render(self, line: str, priority: int) -> str:
        # Spec values and file names reach these lines: shown, never acted on by a terminal;
        # an error's text may quote a header or URL: never a secret.
        shown = printable(redact.scrub(line))
        if self.json_lines:
            record = {"time": utc_iso(self.clock.time()), "priority": priority, "text": shown}
            return json.dumps(record)
        return f"<{priority}>{shown}" if self.journal else shown

    def _draw(self, text: str) -> None:
        if not self.live:
            return
        with self._lock:
            self.bars.write("\r\x1b[K" + printable(redact.scrub(text)))
            self.bars.flush()
            self._bar = True

    def _clear_bar(self) -> None:
        if self._bar:
            self.bars.write("\r\x1b[K")
            self.bars.flush()
            self._bar = False


_live = False


def set_live(value: bool) -> None:
    """Whether progress is drawn as live bars: this process's stream is a terminal."""
    global _live
    _live = value


def live() -> bool:
    """True when progress meters draw bars rather than say a line every so often."""
    return _live


class _HumanFormatter(PrintableFormatter):
    """A warning or an error as a human line (`runspecd: error: ...`); its traceback only
    with -v."""

    def __init__(self, tag: str) -> None:
        super().__init__("%(message)s")
        self.tag = tag

    def format(self, record: logging.LogRecord) -> str:
        text = super().formatMessage(_with_message(record))
        return f"{self.tag}: {record.levelname.lower()}: {text}"


def _with_message(record: logging.LogRecord) -> logging.LogRecord:
    record.message = record.getMessage()
    return record


class _StreamHandler(logging.Handler):
    def __init__(self, stream: Stream) -> None:
        super().__init__()
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            level = max(k for k in _LOG_PRIORITY if k <= max(record.levelno, logging.DEBUG))
            self.stream(Said(text, _LOG_PRIORITY[level]))
        except Exception:
            self.handleError(record)


def setup_logging(stream: Stream, verbose: bool, tag: str = "runspec") -> None:
    """Logging records into `stream`: everything in the logging format with `verbose`, else
    warnings and errors only, as human lines tagged `tag` (the program)."""
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    handler = _StreamHandler(stream)
    if verbose:
        fmt = JOURNAL_VERBOSE_FORMAT if stream.journal else VERBOSE_FORMAT
        handler.setFormatter(PrintableFormatter(fmt))
    else:
        handler.setFormatter(_HumanFormatter(tag))
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    # APScheduler logs every job run at INFO: noise in a journal that people read.
    logging.getLogger("apscheduler").setLevel(logging.DEBUG if verbose else logging.WARNING)
    # huggingface_hub warns once per push of a small file to a Xet repo, and of an unchanged
    # one: runspec's own line says what each push did. Its errors stay; its warnings and
    # notes with -v (never its DEBUG, which can quote a request).
    logging.getLogger("huggingface_hub").setLevel(logging.INFO if verbose else logging.ERROR)
    # httpx's "HTTP Request: POST ..." line per request is INFO: only with -v (and never
    # their DEBUG, which can quote headers: runspec.secrets.redact).
    for name in redact.HTTP_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)
