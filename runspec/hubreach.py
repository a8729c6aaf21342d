"""Telling "the Hub cannot be reached" apart from everything else the client can raise.

A refused connection, a DNS failure or a timeout is the network's or HF_ENDPOINT's fault, not
runspec's: the preflight says so in words a user can act on instead of "the check crashed".
"""

from __future__ import annotations

import os

DEFAULT_ENDPOINT = "https://huggingface.co"
_TRANSPORT = {"TransportError", "ConnectionError", "Timeout"}


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT


def endpoint_set() -> str | None:
    """HF_ENDPOINT when set (a test Hub, a mirror), else None: huggingface_hub's default. Read
    at each call, never at import, so an endpoint set at run time counts."""
    return os.environ.get("HF_ENDPOINT") or None


def _cause(exc: BaseException) -> str:
    text = " ".join(str(exc).lower().split())
    for words, cause in (
        (("refused",), "connection refused"),
        (("name or service not known", "nodename nor servname", "name resolution"), "unknown host"),
        (("timed out", "timeout"), "timed out"),
        (("certificate", "ssl"), "TLS failed"),
    ):
        if any(w in text for w in words):
            return cause
    return type(exc).__name__


def unreachable(exc: BaseException) -> str | None:
    """ "cannot reach the Hub at ENDPOINT: CAUSE" when `exc` (or what it chains) is a transport
    failure; None for an answer the Hub gave (a 404, a 401)."""
    seen: BaseException | None = exc
    while seen is not None:
        # By name: huggingface_hub's HTTP client (httpx, httpx2, requests) changes between
        # releases, and each names its transport failures so.
        names = {cls.__name__ for cls in type(seen).__mro__}
        if names & _TRANSPORT or isinstance(seen, (ConnectionError, TimeoutError)):
            return f"cannot reach the Hub at {endpoint()}: {_cause(seen)}"
        seen = seen.__cause__ or seen.__context__
    return None


UNREACHABLE_FIX = "check the network or HF_ENDPOINT"
