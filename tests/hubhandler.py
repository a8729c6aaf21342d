"""The local Hub's HTTP side: routes, authentication, fault injection, the endpoints."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from tests import hubscheduled, hubxet
from tests.hubmodels import list_models
from tests.hubrepo import CHUNK, LFS_THRESHOLD, Entry, Repo, Request, blob_id, lfs_entry

if TYPE_CHECKING:
    from tests.hubserver import HubServer


class _Dropped(Exception):
    pass


HANG_S = 60.0  # the longest a "hang" fault holds a request (the server's stop ends it at once)

_REPO_API = re.compile(
    r"^/api/(?P<type>models|datasets|spaces)/(?P<repo>[^/]+/[^/]+)"
    r"(?:/(?P<action>revision|preupload|commit|commits|tree|paths-info)/(?P<rev>[^/]+)(?P<rest>/.*)?)?$"
)
_LFS_BATCH = re.compile(
    r"^/(?P<prefix>datasets/|spaces/)?(?P<repo>[^/]+/[^/]+)\.git/info/lfs/objects/batch$"
)
_RESOLVE = re.compile(
    r"^/(?P<prefix>datasets/|spaces/)?(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"
)
_LFS_PUT = re.compile(r"^/_lfs_upload/(?P<oid>[0-9a-f]{64})$")


class Handler(BaseHTTPRequestHandler):
    hub: HubServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        with self.hub._lock:
            self.hub._conns.add(self.connection)

    def finish(self) -> None:
        with self.hub._lock:
            self.hub._conns.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: object) -> None:  # quiet: tests read `hub.log`
        pass

    # --- plumbing ---------------------------------------------------------------------------
    def _route(self, method: str) -> None:
        hub = self.hub
        url = urlsplit(self.path)
        path = unquote(url.path)
        self._query = parse_qs(url.query)
        op, handler = self._dispatch(method, path)
        self._op = op
        self._bytes_in = 0
        self._status = 0
        try:
            if hub._down:
                raise _Dropped
            if op not in ("agent", "lfs_put", "xet_bridge") and not self._authorised():
                self._drain()
                self._json(401, {"error": "Invalid credentials in Authorization header"})
                return
            flaky = hub._take_flaky() if op not in ("agent", "lfs_put") else None
            if flaky is not None:
                self._drain()
                retry = {"Retry-After": str(flaky.retry_after)} if flaky.mode == "429" else {}
                self._json(int(flaky.mode), {"error": "injected incident"}, retry)
                return
            fault = hub._take_fault(op, method, path)
            mode = fault.mode if fault is not None else None
            if mode == "hang":
                self._drain()
                hub.released.wait(HANG_S)  # a server that took the request and never answers
                raise _Dropped
            if mode == "drop":
                self._drain(partial=True)
                raise _Dropped
            if mode == "500":
                self._drain()
                self._json(500, {"error": "injected fault"})
                return
            if fault is not None and mode == "echo":
                self._drain()
                auth = self.headers.get("Authorization", "")
                self._json(
                    fault.status,
                    {
                        "error": f"rejected request with {auth}",
                        "request_headers": dict(self.headers.items()),
                    },
                    {"X-Error-Message": f"bad {auth}", "X-Echo-Authorization": auth},
                )
                return
            handler()
        except _Dropped:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        finally:
            with hub._lock:
                hub.log.append(Request(method, path, op, self._status, self._bytes_in))

    def _dispatch(self, method: str, path: str) -> tuple[str, Callable[[], None]]:
        if (found := hubscheduled.route(self, method, path)) is not None:  # scheduled Jobs
            return found
        if path == "/api/agent-harnesses":
            return "agent", lambda: self._json(404, {"error": "not found"})
        if method == "GET" and path == "/api/whoami-v2" and self.hub.whoami is not None:
            return "whoami", lambda: self._json(200, self.hub.whoami)
        if method == "GET" and path == "/api/models":
            return "list_models", lambda: self._json(200, list_models(self.hub.repos, self._query))
        if method == "POST" and path == "/api/repos/create":
            return "create_repo", self._create_repo
        if method == "POST" and path == "/api/validate-yaml":
            return "validate_yaml", self._validate_yaml
        if m := _LFS_PUT.match(path):
            return "lfs_put", lambda: self._lfs_put(m["oid"])
        if method == "POST" and (m := _LFS_BATCH.match(path)):
            return "lfs_batch", lambda: self._lfs_batch(_type_of(m["prefix"]), m["repo"])
        if method in ("GET", "HEAD") and (m := _RESOLVE.match(path)):
            return "resolve", lambda: self._resolve(
                _type_of(m["prefix"]), m["repo"], m["rev"], m["path"], method == "HEAD"
            )
        if self.hub.xet is not None and (found := hubxet.route(self, method, path)) is not None:
            return found
        if path.startswith("/api/jobs/"):  # Hugging Face Jobs: tests/hubjobs.py
            return self.hub.jobs.route(self, method, path)
        if m := _REPO_API.match(path):
            rtype, repo, action = m["type"][:-1], m["repo"], m["action"]
            rev, rest = m["rev"] or "main", (m["rest"] or "").lstrip("/")
            if action in (None, "revision") and method == "GET":
                return "repo_info", lambda: self._repo_info(rtype, repo, rev)
            if action == "preupload" and method == "POST":
                return "preupload", lambda: self._preupload(rtype, repo, rev)
            if action == "commit" and method == "POST":
                return "commit", lambda: self._commit(rtype, repo, rev)
            if action == "commits" and method == "GET":
                return "commits", lambda: self._commits(rtype, repo, rev)
            if action == "tree" and method == "GET":
                return "tree", lambda: self._tree(rtype, repo, rev, rest)
            if action == "paths-info" and method == "POST":
                return "paths_info", lambda: self._paths_info(rtype, repo, rev)

        def unknown() -> None:
            self._drain()
            self._json(404, {"error": f"no route for {method} {path}"})

        return "unknown", unknown

    def _authorised(self) -> bool:
        return self.headers.get("Authorization", "") == f"Bearer {self.hub.token}"

    def _length(self) -> int:
        return int(self.headers.get("Content-Length") or 0)

    def _body(self) -> bytes:
        data = self.rfile.read(self._length())
        self._bytes_in += len(data)
        return data

    def _chunks(self, left: int) -> Iterator[bytes]:
        """Up to `left` bytes of the request body, a chunk at a time, counted as they come."""
        while left > 0:
            chunk = self.rfile.read(min(CHUNK, left))
            if not chunk:
                return
            left -= len(chunk)
            self._bytes_in += len(chunk)
            self._pace(len(chunk))
            yield chunk

    def _pace(self, nbytes: int) -> None:
        """At the server's link rate (bytes/s, both ways; None: as fast as it goes)."""
        rate = self.hub.link_rate
        if rate:
            time.sleep(nbytes / rate)

    def _drain(self, partial: bool = False) -> None:
        left = self._length()
        if partial:  # read some of it, as a connection cut mid-upload would
            left = min(left, 64 * 1024)
        for _ in self._chunks(left):
            pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self._status = status
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, data: object, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(data).encode()
        self._send(status, body, {"Content-Type": "application/json", **(headers or {})})

    def _not_found(self, code: str, message: str) -> None:
        self._json(404, {"error": message}, {"X-Error-Code": code, "X-Error-Message": message})

    def _repo(self, rtype: str, repo_id: str) -> Repo | None:
        repo = self.hub.repos.get((rtype, repo_id))
        if repo is None:
            self._not_found("RepoNotFound", "Repository not found")
        return repo

    def _revision(self, repo: Repo, rev: str) -> tuple[str, dict[str, Entry]] | None:
        found = repo.at(unquote(rev))
        if found is None:
            self._not_found("RevisionNotFound", f"Invalid rev id: {rev}")
        return found

    def do_GET(self) -> None:
        self._route("GET")

    def do_HEAD(self) -> None:
        self._route("HEAD")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PUT(self) -> None:
        self._route("PUT")

    # --- endpoints ----------------------------------------------------------------------------
    def _validate_yaml(self) -> None:
        """What the Hub does with a README.md in a commit: its front matter must be a YAML
        mapping whose tags, when given, are a list of strings (400 with the errors, else 200)."""
        content = str(json.loads(self._body() or b"{}").get("content", ""))
        errors = []
        if content.startswith("---\n"):
            front = content[4:].split("\n---", 1)[0]
            try:
                meta = yaml.safe_load(front)
            except yaml.YAMLError as exc:
                meta, errors = None, [{"message": f"not YAML: {exc}"}]
            if not errors and not isinstance(meta, dict):
                errors.append({"message": "the metadata is not a mapping"})
            elif isinstance(meta, dict) and not isinstance(meta.get("tags", []), list):
                errors.append({"message": '"tags" must be an array'})
        errors += [{"message": m} for m in self.hub.card_errors]
        self._json(400 if errors else 200, {"errors": errors, "warnings": []})

    def _create_repo(self) -> None:
        req = json.loads(self._body() or b"{}")
        name = f"{req.get('organization') or 'user'}/{req['name']}"
        rtype = req.get("type") or "model"
        prefix = "" if rtype == "model" else f"{rtype}s/"
        with self.hub._lock:
            if (rtype, name) in self.hub.repos:
                self._json(409, {"error": "You already created this repo", "url": ""})
                return
            private = bool(req.get("private")) or req.get("visibility") == "private"
            self.hub.repos[(rtype, name)] = Repo(name, rtype, private=private)
        self._json(200, {"url": f"{self.hub.url}/{prefix}{name}", "name": name})

    def _repo_info(self, rtype: str, repo_id: str, rev: str) -> None:
        if (repo := self._repo(rtype, repo_id)) is None:
            return
        if (found := self._revision(repo, rev)) is None:
            return
        sha, files = found
        self._json(
            200,
            {
                "id": repo_id,
                "sha": sha,
                "private": repo.private,
                "siblings": [{"rfilename": p} for p in sorted(files)],
                "lastModified": "2026-01-01T00:00:00.000Z",
            },
        )

    def _preupload(self, rtype: str, repo_id: str, rev: str) -> None:
        req = json.loads(self._body())
        if (repo := self._repo(rtype, repo_id)) is None:
            return
        out = []
        for f in req["files"]:
            sample = base64.b64decode(f["sample"])
            lfs = f["size"] > LFS_THRESHOLD or b"\0" in sample
            item: dict[str, object] = {
                "path": f["path"],
                "uploadMode": "lfs" if lfs else "regular",
                "shouldIgnore": False,
            }
            if (old := repo.head.get(f["path"])) is not None:
                item["oid"] = old.sha256 if old.sha256 is not None else old.oid
            out.append(item)
        self._json(200, {"files": out, "commitOid": repo.sha})

    def _lfs_batch(self, rtype: str, repo_id: str) -> None:
        req = json.loads(self._body())
        if (self._repo(rtype, repo_id)) is None:
            return
        objects = []
        for obj in req["objects"]:
            oid, size = obj["oid"], obj["size"]
            item: dict[str, object] = {"oid": oid, "size": size}
            if not self.hub.lfs_path(oid).exists():
                item["actions"] = {
                    "upload": {"href": f"{self.hub.url}/_lfs_upload/{oid}", "header": {}}
                }
            objects.append(item)
        self._json(
            200,
            {"transfer": "basic", "objects": objects},
            {"Content-Type": "application/vnd.git-lfs+json"},
        )

    def _lfs_put(self, oid: str) -> None:
        left = self._length()
        digest = hashlib.sha256()
        fd, tmp = tempfile.mkstemp(dir=self.hub.storage / "tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                for chunk in self._chunks(left):
                    left -= len(chunk)
                    digest.update(chunk)
                    fh.write(chunk)
                with self.hub._lock:
                    self.hub.lfs_bytes_received += self._bytes_in
            if left > 0 or digest.hexdigest() != oid:
                self._json(400, {"error": "sha256 does not match the uploaded content"})
                return
            os.replace(tmp, self.hub.lfs_path(oid))
        finally:
            Path(tmp).unlink(missing_ok=True)
        self._send(200, b"")

    def _commit(self, rtype: str, repo_id: str, rev: str) -> None:
        lines = [json.loads(line) for line in self._body().splitlines() if line.strip()]
        if (repo := self._repo(rtype, repo_id)) is None:
            return
        summary = ""
        parent: str | None = None
        adds: dict[str, Entry] = {}
        deletes: set[str] = set()
        for line in lines:
            key, value = line["key"], line["value"]
            if key == "header":
                summary = value.get("summary", "")
                parent = value.get("parentCommit")
            elif key == "file":
                data = base64.b64decode(value["content"])
                adds[value["path"]] = Entry(value["path"], len(data), blob_id(data), data=data)
            elif key == "lfsFile":
                xet = self.hub.xet.find(value["oid"], value["size"]) if self.hub.xet else None
                if xet is None and not self.hub.lfs_path(value["oid"]).exists():
                    self._json(422, {"error": f"LFS object {value['oid']} was never uploaded"})
                    return
                adds[value["path"]] = lfs_entry(
                    value["path"], value["oid"], value["size"], xet.xet_hash if xet else None
                )
            elif key == "deletedFile":
                deletes.add(value["path"])
            elif key == "deletedFolder":
                folder = value["path"].rstrip("/") + "/"
                deletes.update(p for p in repo.head if p.startswith(folder))
        with self.hub._lock:
            # The Hub's optimistic lock: a commit made on an older head is refused.
            if parent is not None and parent != repo.sha:
                self._json(412, {"error": "A commit has happened since. Please refresh."})
                return
            if (refusal := self.hub.quota_refusal(repo_id)) is not None:
                self._json(429, {"error": refusal}, {"X-Error-Message": refusal})
                return
            oid = self.hub._commit(repo, adds, deletes, summary)
        prefix = "" if rtype == "model" else f"{rtype}s/"
        self._json(
            200,
            {
                "commitUrl": f"{self.hub.url}/{prefix}{repo_id}/commit/{oid}",
                "commitOid": oid,
                "success": True,
            },
        )

    def _commits(self, rtype: str, repo_id: str, rev: str) -> None:
        """A page of the branch's commits, newest first, as the Hub lists them
        (huggingface_hub's list_repo_commits reads id, title, message, authors and date)."""
        if (repo := self._repo(rtype, repo_id)) is None:
            return
        if (found := self._revision(repo, rev)) is None:
            return
        # From the revision asked back, as the Hub lists them (a commit id starts the page).
        upto = next(i for i, c in enumerate(repo.commits) if c[0] == found[0]) + 1
        page = []
        for oid, _files, message in reversed(repo.commits[max(0, upto - 50) : upto]):
            title = message.splitlines()[0] if message else ""
            authors = [{"user": repo.authors[oid]}] if oid in repo.authors else []
            item = {"id": oid, "title": title, "message": message, "authors": authors}
            page.append({**item, "date": _date(repo.times.get(oid, 0.0))})
        self._json(200, page)

    def _tree(self, rtype: str, repo_id: str, rev: str, under: str) -> None:
        if (repo := self._repo(rtype, repo_id)) is None:
            return
        if (found := self._revision(repo, rev)) is None:
            return
        recursive = self._query.get("recursive", ["false"])[0].lower() in ("true", "1")
        self._json(200, list(_tree_entries(found[1], under, recursive)))

    def _paths_info(self, rtype: str, repo_id: str, rev: str) -> None:
        form = parse_qs(self._body().decode())
        if (repo := self._repo(rtype, repo_id)) is None:
            return
        if (found := self._revision(repo, rev)) is None:
            return
        expand = form.get("expand", ["false"])[0].lower() == "true"  # httpx sends "true"
        out = []
        for path in form.get("paths", []):
            entry = found[1].get(path)
            if entry is None:
                continue
            data = entry.to_json()
            if expand:  # the commit that last changed the file, as the Hub's lastCommit says it
                data["lastCommit"] = _last_commit(repo, found[0], path)
            if self.hub._lie_all or path in self.hub._lies:
                data["oid"] = "f" * 40
                if "lfs" in data:
                    data["lfs"] = {**data["lfs"], "oid": "0" * 64}  # type: ignore[dict-item]
            out.append(data)
        self._json(200, out)

    def _resolve(self, rtype: str, repo_id: str, rev: str, path: str, head: bool) -> None:
        if (repo := self._repo(rtype, repo_id)) is None:
            return
        if (found := self._revision(repo, rev)) is None:
            return
        sha, files = found
        entry = files.get(path)
        if entry is None:
            self._not_found("EntryNotFound", f"{path} does not exist at {rev}")
            return
        if entry.xet_hash is not None:
            hubxet.redirect(self, sha, entry)
            return
        etag = entry.sha256 or entry.oid
        headers = {
            "X-Repo-Commit": sha,
            "ETag": f'"{etag}"',
            "Content-Type": "application/octet-stream",
            "Accept-Ranges": "bytes",
        }
        start = 0
        if (rng := re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))) is not None:
            start = min(int(rng[1]), entry.size)
        status = 206 if start else 200
        if start:
            headers["Content-Range"] = f"bytes {start}-{entry.size - 1}/{entry.size}"
        headers["Content-Length"] = str(entry.size - start)
        if entry.data is not None:
            self._send(status, entry.data[start:], headers)
            return
        self._status = status
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if head:
            return
        assert entry.sha256 is not None
        with self.hub.lfs_path(entry.sha256).open("rb") as fh:
            fh.seek(start)
            if self.hub.corrupt:
                # Storage rot: the same size, one flipped byte; paths-info still tells the truth.
                first = bytearray(fh.read(CHUNK))
                if first:
                    first[len(first) // 2] ^= 0xFF
                self.wfile.write(bytes(first))
            if not self.hub.link_rate:
                shutil.copyfileobj(fh, self.wfile, CHUNK)
                return
            while chunk := fh.read(CHUNK):
                self.wfile.write(chunk)
                self._pace(len(chunk))


def _date(ts: float) -> str:
    when = datetime.fromtimestamp(ts, tz=timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _last_commit(repo: Repo, upto: str, path: str) -> dict[str, str]:
    """{id, title, date} of the newest commit up to `upto` that changed `path`."""
    last, before = None, None
    for oid, files, message in repo.commits:
        entry = files.get(path)
        if entry is not None and entry != before:
            last = (oid, message)
        before = entry
        if oid == upto:
            break
    assert last is not None
    title = last[1].splitlines()[0] if last[1] else ""
    return {"id": last[0], "title": title, "date": _date(repo.times.get(last[0], 0.0))}


def _type_of(prefix: str | None) -> str:
    return (prefix or "models/").rstrip("/")[:-1]


def _tree_entries(
    files: dict[str, Entry], under: str, recursive: bool
) -> Iterator[dict[str, object]]:
    base = under.strip("/")
    prefix = f"{base}/" if base else ""
    folders: set[str] = set()
    for path in sorted(files):
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix) :]
        parts = rest.split("/")
        for i in range(1, len(parts)):
            folder = prefix + "/".join(parts[:i])
            if (recursive or i == 1) and folder not in folders:
                folders.add(folder)
                yield {"type": "directory", "path": folder, "oid": "0" * 40, "size": 0}
        if recursive or len(parts) == 1:
            yield files[path].to_json()
