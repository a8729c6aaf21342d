"""A word to people who walked away: messages through notification URLs in apprise's format.

A spec's `notify:` (else the daemon config's) lists the URLs; `${NAME}` in one is read from the
daemon's environment when a message goes out, so tokens live in `/etc/runspec/env`, never in a
spec. Each message is sent in its own thread with connect and read timeouts, and whoever waits
for it (the finish, before it ends the machine) waits a bounded time: a failed or hung message
never holds up the run. What apprise logs can quote a URL's parts, tokens included: every line
runspec shows about a message is scrubbed of them, and apprise's own log never reaches the
journal unscrubbed.

apprise is imported only when a message goes out.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from runspec.secrets import redact
from runspec.voice import warning

log = logging.getLogger("runspec.alerts")

URL_FORM = re.compile(r"^(\$\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z][A-Za-z0-9+.-]*://\S+)$")
URL_HINT = "use apprise's scheme://... form, or ${NAME} for a URL kept in the environment"
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 10.0
WAIT_S = 20.0  # the longest the finish waits for a message to go out before it acts
SECRET_MIN = 6  # URL parts this long may be tokens (apprise puts some in the host's place)

KINDS = ("info", "success", "warning", "failure")  # apprise's NotifyType values


@dataclass(frozen=True)
class Message:
    event: str  # what happened, in a few words: "training started"
    title: str
    body: str
    kind: str = "info"


@dataclass
class Target:
    """One URL as written, and what it became in this environment."""

    written: str
    url: str | None  # None: a ${NAME} in it is not set
    missing: list[str] = field(default_factory=list)

    @property
    def scheme(self) -> str:
        shown = self.url or self.written
        return shown.split("://", 1)[0] if "://" in shown else "a URL from the environment"


def expand(url: str, environ: Mapping[str, str]) -> Target:
    missing = [name for name in _REF.findall(url) if not environ.get(name)]
    if missing:
        return Target(url, None, missing)
    return Target(url, _REF.sub(lambda m: environ[m.group(1)], url))


def secrets_of(target: Target, environ: Mapping[str, str]) -> set[str]:
    """Every part of a URL that may be a token: the URL, the values it took from the
    environment, and each part of its address long enough to be one."""
    found = {environ[name] for name in _REF.findall(target.written) if environ.get(name)}
    if target.url is None:
        return found
    found.add(target.url)
    parts = urlsplit(target.url)
    pieces = [parts.netloc, *parts.netloc.replace("@", ":").split(":"), *parts.path.split("/")]
    pieces += [value for _, value in parse_qsl(parts.query)]
    found.update(p for p in pieces if len(p) >= SECRET_MIN)
    return found


def scrub(text: str, secrets: set[str]) -> str:
    """The one scrubber (runspec.secrets.redact), told the notification URLs' secrets too."""
    redact.register(*secrets)
    return redact.scrub(text)


def with_timeouts(url: str) -> str:
    """The URL with apprise's connect and read timeouts, unless it sets its own."""
    query = urlsplit(url).query
    extra = [
        f"{key}={value:g}"
        for key, value in (("cto", CONNECT_TIMEOUT_S), ("rto", READ_TIMEOUT_S))
        if f"{key}=" not in query
    ]
    if not extra:
        return url
    return url + ("&" if "?" in url else "?") + "&".join(extra)


class _Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.lines.append(record.getMessage())


class Sending:
    """A message on its way; `wait` is bounded."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.ok = False

    def wait(self, timeout: float = WAIT_S) -> bool:
        """True when it went out within `timeout` seconds."""
        return self.done.wait(timeout) and self.ok


class Alerts:
    def __init__(
        self,
        urls: Sequence[str],
        say: Callable[[str], None],
        *,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.urls = tuple(urls)
        self.say = say
        self.environ = os.environ if environ is None else environ

    @classmethod
    def choose(
        cls, own: Sequence[str] | None, default: Sequence[str], say: Callable[[str], None]
    ) -> Alerts:
        """A spec's own URLs, else the daemon's (an empty list of its own: none at all)."""
        return cls(default if own is None else own, say)

    def send(self, message: Message) -> Sending:
        """Start sending `message` to every URL; never blocks, never raises."""
        sending = Sending()
        if not self.urls:
            sending.ok = True
            sending.done.set()
            return sending
        targets = [expand(url, self.environ) for url in self.urls]
        thread = threading.Thread(
            target=self._deliver, args=(message, targets, sending), name="notify", daemon=True
        )
        thread.start()
        return sending

    def send_and_wait(self, message: Message, timeout: float = WAIT_S) -> bool:
        """Send, and wait at most `timeout` seconds for it to go out (before a finish)."""
        sending = self.send(message)
        if not sending.done.wait(timeout):
            late = f'notify: "{message.event}" still not sent after {timeout:g}s; going on'
            self.say(warning(late))
        return sending.ok

    def _deliver(self, message: Message, targets: list[Target], sending: Sending) -> None:
        secrets: set[str] = set()
        for target in targets:
            secrets |= secrets_of(target, self.environ)
        try:
            sending.ok = self._notify(message, targets, secrets)
        except Exception as exc:  # a message must never take a run down with it
            shown = scrub(f"{type(exc).__name__}: {exc}", secrets)
            self.say(warning(f'notify: "{message.event}" not sent: {shown}'))
        finally:
            sending.done.set()

    def _notify(self, message: Message, targets: list[Target], secrets: set[str]) -> bool:
        """Each URL on its own (one down must not hide that another got it); one line says
        where it went and where not."""
        quiet = logging.getLogger("apprise")
        quiet.propagate = False  # its lines quote URL parts: only scrubbed ones are shown
        sent: list[str] = []
        failed: list[str] = []
        for target in targets:
            if target.url is None:
                names = ", ".join(f"${{{n}}}" for n in target.missing)
                failed.append(f"{names} not set in the environment")
                continue
            captured = _Captured()
            quiet.addHandler(captured)
            try:
                ok = _send_one(target.url, message)
            finally:
                quiet.removeHandler(captured)
            if ok:
                sent.append(target.scheme)
            else:
                why = captured.lines[-1] if captured.lines else "apprise cannot read the URL"
                failed.append(f"{target.scheme}: {scrub(why, secrets)}")
        told = f'notify: "{message.event}"'
        if sent:
            told += f" sent ({', '.join(sent)})"
        if failed:
            told += f"{';' if sent else ''} NOT sent ({'; '.join(failed)})"
        self.say(warning(told) if failed else told)
        return not failed


def _send_one(url: str, message: Message) -> bool:
    import apprise

    box = apprise.Apprise()
    if not box.add(with_timeouts(url)):
        return False
    kind = message.kind if message.kind in KINDS else "info"
    return bool(box.notify(title=message.title, body=message.body, notify_type=kind))
