"""A followed branch, read through git: a bare mirror in the state folder, fetched, listed and
read as data.

A followed repository is hostile until proven otherwise, as the inbox is: git runs with no
terminal prompt, no hooks, no user or system config, no submodules, no checkout (a bare mirror:
no file of the repository is ever written as a file), a fetch that checks every object and
ends within FETCH_TIMEOUT_S, a mirror that may not grow past MAX_MIRROR_BYTES and a spec folder
of at most MAX_ENTRIES entries. Only blobs
are read, each size-checked before it is read. Credentials come from the daemon's environment
(`/etc/runspec/env`), never from the config or a spec: `RUNSPEC_GIT_TOKEN` is sent as an HTTP
header through git's environment (never on a command line, where `ps` shows it), and
`RUNSPEC_GIT_SSH_KEY` names a deploy key file for ssh remotes.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from runspec.errors import RunspecError
from runspec.secrets.apartuid import as_root

FETCH_TIMEOUT_S = 120.0
READ_TIMEOUT_S = 30.0
MAX_MIRROR_BYTES = 512 << 20
MAX_ENTRIES = 1000  # entries under the spec folder: more is no folder of specs
BLOB_MODES = ("100644", "100755")  # a link (120000) or a submodule (160000) is never followed
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_SCP_LIKE = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[A-Za-z0-9._/~-]+")
_BRANCH = re.compile(r"[A-Za-z0-9._/-]{1,200}")
# hf://datasets/acme/experiments (as huggingface_hub's HfFileSystem names a repo): read through
# the Hub's API (runspec.daemon.hubmirror), not git.
_HF = re.compile(
    r"hf://(?:(?P<kind>datasets|spaces|models)/)?"
    r"(?P<repo>[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95})/?"
)


class GitError(RunspecError):
    """The repository could not be read: a line for `runspec status`, and a retry."""


@dataclass(frozen=True)
class Entry:
    path: str  # in the repository, as git lists it
    blob: str
    mode: str
    refused: str = ""  # why an entry is never followed, where its mode does not say it


def hub_repo(url: str) -> tuple[str, str] | None:
    """(repo type, repo id) of an hf:// URL; None for any other."""
    found = _HF.fullmatch(url)
    if found is None or ".." in found["repo"]:
        return None
    if found["kind"] is None and found["repo"].split("/")[0] in ("datasets", "spaces", "models"):
        return None  # hf://datasets/acme: a kind and an org, no repo name
    return (found["kind"] or "models")[:-1], found["repo"]


@dataclass(frozen=True)
class CommitInfo:
    commit: str
    author: str
    subject: str
    time: str  # ISO, as git stamps the commit


def check_remote(url: str) -> str | None:
    """Why `url` is no remote runspec follows; None when it is."""
    if _SCP_LIKE.fullmatch(url) or hub_repo(url) is not None:
        return None
    parts = urlsplit(url)
    if parts.scheme == "hf":
        return f"{url!r}: name a Hub repo as hf://datasets/ORG/NAME (or models/, spaces/)"
    if parts.scheme not in ("https", "http", "ssh", "file"):
        return (
            f"{url!r}: use https://, ssh://, git@host:path, file:// or hf://datasets/ORG/NAME "
            f"(got {parts.scheme!r})"
        )
    if parts.password or (parts.username and parts.scheme in ("https", "http")):
        return (
            "credentials in the repository URL would sit in the config in cleartext: put a "
            "token in /etc/runspec/env as RUNSPEC_GIT_TOKEN (or a deploy key as "
            "RUNSPEC_GIT_SSH_KEY) and give the URL without them"
        )
    if parts.scheme == "file" and not parts.path.startswith("/"):
        return f"{url!r}: a file:// URL names an absolute path"
    return None


def check_branch(branch: str) -> str | None:
    if not _BRANCH.fullmatch(branch) or ".." in branch or branch.startswith(("-", "/")):
        return f"{branch!r} is not a branch name runspec follows (letters, digits, . _ - /)"
    return None


def shown_remote(url: str) -> str:
    """The URL as logs and provenance show it: never a user name or password."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    return url


def _environ(url: str, environ: dict[str, str]) -> dict[str, str]:
    """What git runs with: no prompt, no config but ours, the credential as a header."""
    env = {k: v for k, v in environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
    env.update(
        HOME="/nonexistent",
        GIT_TERMINAL_PROMPT="0",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_ASKPASS="/bin/false",
        SSH_ASKPASS="/bin/false",
        GIT_PROTOCOL_FROM_USER="0",
    )
    config = [
        ("core.hooksPath", "/dev/null"),
        ("transfer.fsckObjects", "true"),
        ("protocol.allow", "never"),
        ("protocol.https.allow", "always"),
        ("protocol.http.allow", "always"),
        ("protocol.ssh.allow", "always"),
        ("protocol.file.allow", "always"),
    ]
    token = environ.get("RUNSPEC_GIT_TOKEN", "")
    if token and urlsplit(url).scheme in ("https", "http"):
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        config.append(("http.extraHeader", f"Authorization: Basic {basic}"))
    env["GIT_CONFIG_COUNT"] = str(len(config))
    for i, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    key_file = environ.get("RUNSPEC_GIT_SSH_KEY", "")
    if key_file:
        env["GIT_SSH_COMMAND"] = (
            f"ssh -i '{key_file}' -o IdentitiesOnly=yes -o BatchMode=yes "
            "-o StrictHostKeyChecking=accept-new"
        )
    return env


class Mirror:
    """One followed repository's bare mirror under `folder`."""

    def __init__(self, folder: Path, url: str, environ: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.url = url
        self.env = _environ(url, dict(os.environ if environ is None else environ))
        self.proc: subprocess.Popen[bytes] | None = None

    def _git(self, *args: str, timeout: float = READ_TIMEOUT_S) -> bytes:
        if shutil.which("git") is None:
            raise GitError("git is not installed on this machine: apt-get install git")
        proc = subprocess.Popen(
            ["git", "--git-dir", str(self.folder), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            # A daemon kept apart from its trainers (runspec.secrets.apartuid) gives git uid 0
            # whole: git checks its files with access(2), which asks the real uid.
            **as_root(),
        )
        self.proc = proc
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            proc.communicate()
            raise GitError(f"git {args[0]} took over {timeout:.0f} s") from exc
        finally:
            self.proc = None
        if proc.returncode != 0:
            last = err.decode(errors="replace").strip().splitlines()[-1:] or ["failed"]
            raise GitError(f"git {args[0]}: {last[0][:300]}")
        return out

    def kill(self) -> None:
        """End the git this mirror started, if one runs (by its own handle, never by name)."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    def fetch(self, branch: str) -> str:
        """The branch's head commit, fetched into the mirror (a force-push is taken as is)."""
        if not (self.folder / "HEAD").is_file():
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._git("init", "--bare", "--quiet")
        ref = f"refs/runspec/{branch}"
        self._git(
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-recurse-submodules",
            "--prune",
            "--",
            self.url,
            f"+refs/heads/{branch}:{ref}",
            timeout=FETCH_TIMEOUT_S,
        )
        if self.stored() > MAX_MIRROR_BYTES:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise GitError(
                f"the repository is over {MAX_MIRROR_BYTES >> 20} MiB: follow a repository "
                "of specs, not one of data"
            )
        head = self._git("rev-parse", "--verify", f"{ref}^{{commit}}").decode().strip()
        if not _SHA.fullmatch(head):
            raise GitError(f"git rev-parse gave {head[:80]!r}, no commit")
        return head

    def stored(self) -> int:
        """The bytes the mirror's objects take, as git counts them (its packs and loose
        objects: a few directory reads, never a walk of every file on each poll)."""
        out = self._git("count-objects", "-v").decode("ascii", "replace")
        fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
        kib = (int(v) for k, v in fields.items() if k in ("size", "size-pack", "size-garbage"))
        return sum(kib) * 1024

    def specs(self, commit: str, folder: str) -> list[Entry]:
        """Every entry under `folder` at `commit` (links and submodules included, for the
        caller to refuse by mode)."""
        out = self._git("ls-tree", "-r", "-z", "--full-tree", commit, "--", f"{folder}/")
        entries: list[Entry] = []
        for record in out.split(b"\0"):
            if not record:
                continue
            if len(entries) >= MAX_ENTRIES:
                raise GitError(
                    f"over {MAX_ENTRIES} entries under {folder}/: follow a folder of specs"
                )
            meta, _, raw_path = record.partition(b"\t")
            mode, _kind, blob = meta.decode().split(" ")
            entries.append(Entry(raw_path.decode("utf-8", "replace"), blob, mode))
        return entries

    def size(self, blob: str) -> int:
        return int(self._git("cat-file", "-s", blob).decode().strip())

    def read(self, blob: str) -> bytes:
        return self._git("cat-file", "blob", blob)

    def last_commit(self, commit: str, path: str) -> CommitInfo:
        """The newest commit up to `commit` that touched `path`: who wrote the spec, and why."""
        out = self._git(
            "log",
            "-1",
            "--no-show-signature",
            "--format=%H%x00%an <%ae>%x00%s%x00%cI",
            commit,
            "--",
            path,
        )
        fields = out.decode("utf-8", "replace").rstrip("\n").split("\0")
        if len(fields) != 4 or not _SHA.fullmatch(fields[0]):
            return CommitInfo(commit, "", "", "")
        return CommitInfo(*fields)
