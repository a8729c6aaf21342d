"""The local Hub's Xet side: the token routes, a content store, and the download bridge.

The real Hub stores LFS files through Xet, and huggingface_hub uploads through it whenever
hf_xet is installed (a hard dependency on x86_64 and arm64). What this stand-in does, and where
each answer comes from:

- **Token routes.** `GET /api/{type}s/{repo}/xet-{write,read}-token/{rev}` (huggingface_hub
  2.4.0, utils/_xet.py: xet_connection_info_refresh_url) answers the `X-Xet-Cas-Url`,
  `X-Xet-Access-Token` and `X-Xet-Token-Expiration` headers (constants.py:334-336) and the JSON
  body `{"accessToken", "exp", "casUrl"}` that hf_xet reads (hf_xet 1.8.0,
  XetSession.new_upload_commit's docstring).
- **The content store** is xet-core's own: the CAS URL handed out is `local://<folder>`, which
  hf_xet serves with its local CAS client (huggingface/xet-core:
  xet_data/src/processing/configurations.rs, SessionContext::is_local; hf_xet/tests/conftest.py
  uses the same). So xorbs and shards are chunked, deduplicated and written by the very code a
  rented box runs; only the HTTPS between the client and cas.xethub.hf.co is left out.
- **The commit.** A commit names a Xet file by the sha256 in its `lfsFile.oid`. The Hub finds the
  file through the shard the client uploaded: each file entry carries that sha256 in its
  metadata extension (xet-core: xet_core_structures/src/metadata_shard/file_structs.rs,
  FileDataSequenceHeader / FileMetadataExt, and shard_format.rs for the layout). That sha256 is
  the one the client declared when it declared one (`Sha256Policy::Provided`,
  xet_data/src/processing/file_cleaner.rs): nothing here hashes the bytes, as nothing does on
  the real Hub, so a declared hash that is not the bytes' is recorded as given.
- **Downloads.** `resolve` for a Xet file answers a 302 to the bridge (on the Hub, a
  cas-bridge.xethub.hf.co URL) with `X-Xet-Hash` and a `Link: <…>; rel="xet-auth"` header
  (utils/_xet.py: parse_xet_file_data_from_response); the bridge rebuilds the bytes from the
  store with hf_xet's own reconstruction and serves them.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.hubhandler import Handler
    from tests.hubrepo import Entry

TOKEN_ROUTE = re.compile(
    r"^/api/(?P<type>models|datasets|spaces)/(?P<repo>[^/]+/[^/]+)"
    r"/xet-(?P<kind>read|write)-token/(?P<rev>[^/]+)$"
)
BRIDGE_ROUTE = re.compile(r"^/_xet_bridge/(?P<hash>[0-9a-f]{64})/(?P<size>[0-9]{1,15})$")
TOKEN_LIFE_S = 3600

# xet-core shard layout (shard_format.rs, file_structs.rs): a 48-byte header (32-byte tag,
# version, footer size), then the file-info section from byte 48: per file a 48-byte
# FileDataSequenceHeader (file hash, flags u32, entry count u32, 8 unused bytes), its 48-byte
# segment entries (xorb hash, xorb flags u32, unpacked bytes u32, chunk start, chunk end), as
# many 48-byte verification entries when flagged, a 48-byte metadata extension (the sha256)
# when flagged; the section ends with a header whose file hash is all 0xFF bytes.
_SHARD_HEADER = 48
_ENTRY = 48
_WITH_VERIFICATION = 1 << 31
_WITH_METADATA_EXT = 1 << 30
_BOOKEND = b"\xff" * 32
_MAX_SHARD = 64 << 20  # a stand-in's shards are small; a bigger one is not read


def _hash_hex(raw: bytes) -> str:
    """xet-core's MerkleHash::hex: four little-endian u64 words, each as 16 hex digits."""
    return "".join(f"{word:016x}" for word in struct.unpack("<4Q", raw))


@dataclass(frozen=True)
class XetFile:
    xet_hash: str
    size: int
    sha256: str | None  # as the client recorded it (declared or computed), None if absent


def shard_files(data: bytes) -> Iterator[XetFile]:
    """The file entries of one shard, read strictly; a malformed shard yields what came before."""
    off = _SHARD_HEADER
    while off + _ENTRY <= len(data):
        head = data[off : off + _ENTRY]
        if head[:32] == _BOOKEND:
            return
        flags, count = struct.unpack("<II", head[32:40])
        off += _ENTRY
        segments = data[off : off + _ENTRY * count]
        size = sum(
            struct.unpack("<I", segments[i + 36 : i + 40])[0]
            for i in range(0, len(segments), _ENTRY)
        )
        off += _ENTRY * count
        if flags & _WITH_VERIFICATION:
            off += _ENTRY * count
        sha256 = None
        if flags & _WITH_METADATA_EXT:
            sha256 = _hash_hex(data[off : off + 32])
            off += _ENTRY
        if off > len(data):
            return
        yield XetFile(_hash_hex(head[:32]), size, sha256)


class XetStore:
    """The CAS behind the local Hub: a folder that hf_xet reads and writes as `local://`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.cas_url = f"local://{root}"
        # Every token handed out, as (kind, repo, revision): what a test can ask about.
        self.tokens: list[tuple[str, str, str]] = []
        # For each bridge request: whether it carried an Authorization header (the Hub token
        # must not leave the Hub's hosts).
        self.bridge_auth: list[bool] = []

    def token(self, kind: str, repo: str, rev: str) -> tuple[dict[str, str], dict[str, object]]:
        """The token route's answer: its headers and its JSON body."""
        self.tokens.append((kind, repo, rev))
        expires = int(time.time()) + TOKEN_LIFE_S
        access = f"xet-{kind}-standin"
        headers = {
            "X-Xet-Cas-Url": self.cas_url,
            "X-Xet-Access-Token": access,
            "X-Xet-Token-Expiration": str(expires),
        }
        return headers, {"accessToken": access, "exp": expires, "casUrl": self.cas_url}

    def find(self, sha256: str, size: int) -> XetFile | None:
        """The stored file the shards record with this sha256 and size, as the Hub resolves a
        commit's `lfsFile`; None when no uploaded shard names it."""
        for shard in sorted((self.root / "xet" / "xorbs" / "shards").glob("*.mdb")):
            if shard.stat().st_size > _MAX_SHARD:
                continue
            for found in shard_files(shard.read_bytes()):
                if found.sha256 == sha256 and found.size == size:
                    return found
        return None

    def stored_bytes(self) -> int:
        """What the store holds in xorbs (chunk data, as sent, with xet-core's small framing)."""
        xorbs = self.root / "xet" / "xorbs" / "xorbs"
        return sum(p.stat().st_size for p in xorbs.glob("*") if not p.name.endswith(".tagset"))

    def chunks(self, xet_hash: str, size: int) -> Iterator[bytes]:
        """The file's bytes, rebuilt from its xorbs by hf_xet's own reconstruction."""
        import hf_xet

        group = hf_xet.XetSession().new_download_stream_group(endpoint=self.cas_url)
        for chunk in group.download_stream(hf_xet.XetFileInfo(xet_hash, size)):
            yield bytes(chunk)

    def read(self, xet_hash: str, size: int) -> bytes:
        return b"".join(self.chunks(xet_hash, size))


def bridge_url(hub_url: str) -> str:
    """The bridge's origin: the same server under the name `localhost`, another host to a
    client that compares host names."""
    return hub_url.replace("//127.0.0.1:", "//localhost:")


def route(handler: Handler, method: str, path: str) -> tuple[str, Callable[[], None]] | None:
    if method == "GET" and (m := TOKEN_ROUTE.match(path)):
        rtype = m["type"][:-1]
        return "xet_token", lambda: _token(handler, rtype, m["repo"], m["kind"], m["rev"])
    if method in ("GET", "HEAD") and (m := BRIDGE_ROUTE.match(path)):
        return "xet_bridge", lambda: _bridge(handler, m["hash"], int(m["size"]))
    return None


def _token(handler: Handler, rtype: str, repo_id: str, kind: str, rev: str) -> None:
    handler._drain()
    if handler._repo(rtype, repo_id) is None:
        return
    assert handler.hub.xet is not None
    headers, body = handler.hub.xet.token(kind, repo_id, rev)
    handler._json(200, body, headers)


def redirect(handler: Handler, commit: str, entry: Entry) -> None:
    """`resolve` of a Xet file: a 302 to the bridge, with what huggingface_hub reads of it
    (file_download.py: X-Linked-Etag and X-Linked-Size; utils/_xet.py: X-Xet-Hash and the
    xet-auth link to the read-token route)."""
    hub = handler.hub
    assert entry.xet_hash is not None and entry.sha256 is not None
    match = re.match(r"^/(datasets/|spaces/)?([^/]+/[^/]+)/resolve/", handler.path)
    prefix, repo_id = (match[1] or "", match[2]) if match else ("", "")
    rtype = prefix.rstrip("/")[:-1] or "model"
    auth = f"{hub.url}/api/{rtype}s/{repo_id}/xet-read-token/{commit}"
    handler._send(
        302,
        b"",
        {
            # Another host, as cas-bridge.xethub.hf.co is: the client does not follow it for a
            # HEAD (utils/_http.py, _httpx2_follow_hub_redirects_with_backoff) and sends no
            # Hub token there.
            "Location": f"{bridge_url(hub.url)}/_xet_bridge/{entry.xet_hash}/{entry.size}",
            "X-Repo-Commit": commit,
            "ETag": f'"{entry.oid}"',
            "X-Linked-Etag": f'"{entry.sha256}"',
            "X-Linked-Size": str(entry.size),
            "X-Xet-Hash": entry.xet_hash,
            "Link": f'<{auth}>; rel="xet-auth"',
        },
    )


def _bridge(handler: Handler, xet_hash: str, size: int) -> None:
    """The bytes of a Xet file, as cas-bridge serves them (no Range: a whole-file read)."""
    hub = handler.hub
    assert hub.xet is not None
    hub.xet.bridge_auth.append("Authorization" in handler.headers)
    stream = hub.xet.chunks(xet_hash, size)
    try:
        first = next(stream, b"")
    except Exception as exc:  # hf_xet's: the store has no such file
        handler._json(404, {"error": f"no Xet file {xet_hash}: {exc}"})
        return
    handler._send(
        200, b"", {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
    )
    if handler.command == "HEAD":
        return
    if hub.corrupt and first:
        # Storage rot: the same size, one flipped byte; the Hub's record still says the same.
        flipped = bytearray(first)
        flipped[len(flipped) // 2] ^= 0xFF
        first = bytes(flipped)
    for chunk in _chain(first, stream):
        handler.wfile.write(chunk)
        handler._pace(len(chunk))


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest
