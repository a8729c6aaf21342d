"""sd_notify over the raw datagram socket (stdlib only): readiness, STATUS= and watchdog pings.

Outside systemd (no NOTIFY_SOCKET) every call does nothing, so the daemon runs the same way in
a plain container.
"""

from __future__ import annotations

import logging
import os
import socket

from runspec.units import plain_int

log = logging.getLogger("runspec.daemon")


class Notifier:
    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = dict(os.environ) if environ is None else environ
        self.address = env.get("NOTIFY_SOCKET") or None
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        # WATCHDOG_PID, when set, says which process the watchdog is meant for.
        mine = not pid or pid == str(os.getpid())
        self.watchdog_usec = (plain_int(usec) or 0) if mine else 0
        self._last_status = ""

    @property
    def enabled(self) -> bool:
        return self.address is not None

    @property
    def watchdog_interval(self) -> float | None:
        """Seconds between pings: half the watchdog timeout, as sd_watchdog_enabled(3) advises."""
        if not self.watchdog_usec:
            return None
        return self.watchdog_usec / 2_000_000

    def send(self, message: str) -> bool:
        if not self.address:
            return False
        addr = self.address
        if addr.startswith("@"):
            addr = "\0" + addr[1:]  # abstract namespace socket
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                # Never block the main loop: a reader that stopped reading (a full queue) costs
                # one dropped message, not a stalled daemon.
                sock.setblocking(False)
                sock.connect(addr)
                sock.sendall(message.encode())
        except BlockingIOError:
            log.debug("sd_notify: the notify socket is full; dropped %r", message)
            return False
        except OSError as exc:
            log.warning("sd_notify failed: %s", exc)
            return False
        return True

    def ready(self, status: str = "") -> None:
        self.send("READY=1" + (f"\nSTATUS={status}" if status else ""))
        self._last_status = status

    def status(self, text: str) -> None:
        if text != self._last_status:
            self._last_status = text
            self.send(f"STATUS={text}")

    def watchdog(self) -> None:
        self.send("WATCHDOG=1")

    def stopping(self) -> None:
        self.send("STOPPING=1")

    def reloading(self) -> None:
        self.send("RELOADING=1")
