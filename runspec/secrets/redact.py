"""No secret in any log record: blanked where every record is made, once per process.

`install()` (the CLI calls it first thing, so the daemon and every command have it) wraps the
logging module's record factory, so each record, whatever logger made it and whichever handler
shows it (stderr, the journal, pytest's capture), carries its message already formatted and
scrubbed, and a traceback it holds already formatted and scrubbed. Scrubbing blanks the value
of every secret in the environment (runspec.secrets.secretenv: the Hub token, every provider's keys,
any name shaped like a secret), anything shaped like a Hub token, and whatever follows
`Bearer`. It also raises the HTTP clients' loggers to INFO: their DEBUG lines print raw request
and response headers, and a Hub or proxy that echoes the request puts the token there.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from runspec.secrets.secretenv import secret_values

# httpx's own and the HTTP/1.1 and HTTP/2 layers below it, in both the httpx and httpx2 families
# (huggingface_hub uses one of them), and urllib3 for anything requests-based.
HTTP_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "hpack", "urllib3")
_TOKEN_SHAPE = re.compile(r"hf_[A-Za-z0-9]{6,}")
_BEARER = re.compile(r"(Bearer\s+)[^\s'\",;)\]}]+", re.IGNORECASE)
_MARK = "_runspec_scrubs"


# Secrets that are not in the environment (a push target's, a notification URL's password):
# whoever holds one registers it, and from then on every scrub blanks it.
_REGISTERED: set[str] = set()


def register(*secrets: str) -> None:
    """Add secrets to what every scrub blanks (the one registry of push targets, providers and
    notification URLs); empty ones are ignored."""
    _REGISTERED.update(s for s in secrets if s)


def scrub(text: str) -> str:
    """`text` with every secret this process knows, and anything shaped like one, blanked."""
    known = {*secret_values(), *_REGISTERED}
    for secret in sorted(known, key=len, reverse=True):  # a longer one may hold a shorter
        text = text.replace(secret, "***")
    text = _TOKEN_SHAPE.sub("hf_***", text)
    return _BEARER.sub(r"\1***", text)


def _scrub_record(record: logging.LogRecord) -> logging.LogRecord:
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: logging reports it when the record is shown
        return record
    record.msg, record.args = scrub(message), None
    if record.exc_info and not record.exc_text:
        record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
    if record.stack_info:
        record.stack_info = scrub(record.stack_info)
    return record


def install() -> None:
    """Scrub every log record this process makes from now on; idempotent."""
    for name in HTTP_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level < logging.INFO:
            logger.setLevel(logging.INFO)
    previous = logging.getLogRecordFactory()
    if getattr(previous, _MARK, False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return _scrub_record(previous(*args, **kwargs))

    setattr(factory, _MARK, True)
    logging.setLogRecordFactory(factory)
