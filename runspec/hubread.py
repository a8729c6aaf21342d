"""The one reader of small files that others wrote on the Hub: a lease, a record, a manifest.

Whoever can write to a repo (anyone in its org, or a name typed wrong) chooses these bytes, so
each read is bounded three ways before anything is parsed: a size cap, a TOTAL time cap (a file
served a byte at a time ends the read when the cap is spent, not when each byte is late), and
JSON read strictly: no NaN or Infinity, no duplicate keys, at most MAX_DEPTH levels deep. What
the fields mean is then read by each caller, typed, rejecting what it does not expect.

The request runs in a worker thread joined with the total cap, and the worker itself stops at
the cap between chunks: a server that drips its headers cannot hold the caller either.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from runspec.errors import RunspecError
from runspec.hubreach import endpoint_set

T = TypeVar("T")
MAX_BYTES = 64 * 1024
TOTAL_S = 30.0
MAX_DEPTH = 32
_SHA = re.compile(r"^[0-9a-f]{40}$")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def one_line(exc: BaseException) -> str:
    """runspec.push.base.one_line, imported when needed: runspec.push imports this module."""
    from runspec.push.base import one_line as said

    return said(exc)


class HubReadError(RunspecError):
    """A Hub file could not be read: the network's or the Hub's fault."""


class HostileFile(HubReadError):
    """The Hub answered with something runspec does not read: too big, too slow, not JSON."""


class TooBig(HostileFile):
    """A file over the reader's cap: not one runspec wrote, however the Hub serves it."""


class HubRefused(HubReadError):
    """The Hub refused the token (HTTP 401 or 403): reading again does not change that."""


def _get(url: str, max_bytes: int, total_s: float, out: dict[str, Any]) -> None:
    from huggingface_hub.utils import build_hf_headers, get_session

    started = time.monotonic()
    headers = {**build_hf_headers(), "Accept-Encoding": "identity"}
    try:
        with get_session().stream(
            "GET", url, headers=headers, follow_redirects=True, timeout=min(total_s, 10.0)
        ) as resp:
            out["status"] = resp.status_code
            if resp.status_code != 200:
                return
            data = bytearray()
            for chunk in resp.iter_raw():
                data += chunk
                if len(data) > max_bytes:
                    out["error"] = TooBig(f"over {max_bytes} bytes")
                    return
                if time.monotonic() - started > total_s:
                    out["error"] = HostileFile(f"not served within {total_s:g}s")
                    return
            out["data"] = bytes(data)
    except Exception as exc:  # the client's network errors, whatever the client is
        out["error"] = HubReadError(one_line(exc))


def fetch(url: str, *, max_bytes: int = MAX_BYTES, total_s: float = TOTAL_S) -> bytes | None:
    """The body of `url` (None for a 404), read within `total_s` seconds in all and at most
    `max_bytes` long; raises HostileFile or HubReadError."""
    out: dict[str, Any] = {}
    worker = threading.Thread(target=_get, args=(url, max_bytes, total_s, out), daemon=True)
    worker.start()
    worker.join(total_s + 1.0)
    if worker.is_alive():
        if "status" not in out:  # no answer at all: the network's or the Hub's, not the file's
            raise HubReadError(f"no answer within {total_s:g}s")
        raise HostileFile(f"not served within {total_s:g}s")
    if "error" in out:
        raise out["error"]
    status = out.get("status")
    if status == 404:
        return None
    if status in (401, 403):
        raise HubRefused(f"HTTP {status}")
    if status != 200:
        raise HubReadError(f"HTTP {status}")
    data: bytes = out["data"]
    return data


def within(total_s: float, what: str, call: Callable[[], T]) -> T:
    """`call()` (a huggingface_hub listing, which takes no total time) given `total_s` seconds
    in all; raises HubReadError when it did not answer by then (it is left to the network's
    own timeout in a daemon thread), or whatever it raised."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except Exception as exc:  # handed to the caller as it is
            out["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(total_s)
    if worker.is_alive():
        raise HubReadError(f"{what}: no answer within {total_s:g}s")
    if "error" in out:
        raise out["error"]
    value: T = out["value"]
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"the key {key!r} is there twice")
        found[key] = value
    return found


def _depth_ok(text: str, limit: int) -> bool:
    """Whether brackets outside strings nest at most `limit` deep (checked before parsing: the
    parser's own recursion is what a deep file attacks)."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return False
        elif char in "]}":
            depth -= 1
    return True


def strict_json(data: bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """`data` as JSON, read strictly; raises HostileFile saying why not."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HostileFile("not UTF-8") from exc
    if not _depth_ok(text, max_depth):
        raise HostileFile(f"JSON nested over {max_depth} levels deep")
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as exc:
        raise HostileFile(f"not strict JSON: {one_line(exc)}") from exc


def repo_ok(repo: str) -> bool:
    return bool(_REPO.match(repo)) and ".." not in repo


def head(repo: str, *, total_s: float = TOTAL_S) -> str | None:
    """The main branch's commit of a model repo (None: no such repo), read like any other
    small file: `HfApi.repo_info` has no total time cap."""
    if not repo_ok(repo):
        raise HostileFile(f"{repo!r} is not a Hub repo id")
    from huggingface_hub import constants

    base = (endpoint_set() or constants.ENDPOINT).rstrip("/")
    try:
        data = fetch(f"{base}/api/models/{repo}/revision/main", total_s=total_s)
    except HostileFile as exc:
        raise type(exc)(f"{repo}'s head: {exc}") from exc
    except HubReadError as exc:
        raise type(exc)(f"cannot read {repo} on the Hub: {exc}") from exc
    if data is None:
        return None
    info = strict_json(data)
    sha = info.get("sha") if isinstance(info, dict) else None
    if not isinstance(sha, str) or not _SHA.match(sha):
        raise HostileFile(f"{repo}'s head is not a commit id")
    return sha


def file_json(repo: str, path: str, sha: str, *, total_s: float = TOTAL_S) -> Any:
    """The JSON file at `path` in `repo` at commit `sha` (None where there is none), strictly
    read; raises HostileFile or HubReadError, each naming the repo and the file."""
    from huggingface_hub import hf_hub_url

    if not repo_ok(repo):
        raise HostileFile(f"{repo!r} is not a Hub repo id")
    if not _SHA.match(sha):
        raise HostileFile(f"{sha!r} is not a commit id")
    url = hf_hub_url(repo, path, revision=sha, endpoint=endpoint_set())
    try:
        data = fetch(url, total_s=total_s)
        return None if data is None else strict_json(data)
    except HostileFile as exc:
        raise HostileFile(f"{repo}: {path}: {exc}") from exc
    except HubReadError as exc:
        raise HubReadError(f"cannot read {repo}'s {path}: {exc}") from exc
