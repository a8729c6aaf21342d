"""Where a spec came from: the git commit, its path in the repository and whether the tree was
dirty, so a pushed checkpoint always says which spec made it (spec-v1.md, Provenance)."""

from __future__ import annotations

import getpass
import re
import socket
import subprocess
from pathlib import Path
from typing import Any

GIT_TIMEOUT = 10.0


def _git(cwd: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(cwd), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _without_credentials(url: str | None) -> str | None:
    # https://user:token@host/... must never reach the state folder or a pushed file.
    return re.sub(r"//[^/@]*@", "//", url) if url else url


def git_info(spec_file: Path) -> dict[str, Any] | None:
    """The commit, the path in the repository and dirtiness; None outside a git work tree."""
    folder = spec_file.absolute().parent
    top = _git(folder, "rev-parse", "--show-toplevel")
    if not top:
        return None
    rel = spec_file.absolute().resolve().relative_to(Path(top).resolve()).as_posix()
    # Path arguments are relative to the repository's top, so every git call runs there: run
    # from a subfolder, `ls-files -- specs/x.yaml` would look for specs/specs/x.yaml.
    root = Path(top)
    commit = _git(root, "rev-parse", "HEAD")  # None in a repository without commits
    status = _git(root, "status", "--porcelain", "--untracked-files=all")
    file_status = _git(root, "status", "--porcelain", "--untracked-files=all", "--", rel)
    tracked = _git(root, "ls-files", "--error-unmatch", "--", rel) is not None
    return {
        "commit": commit,
        "path": rel,
        "dirty": bool(status),
        "spec_modified": bool(file_status),
        "spec_tracked": tracked,
        "remote": _without_credentials(_git(root, "config", "--get", "remote.origin.url")),
        "branch": _git(root, "rev-parse", "--abbrev-ref", "HEAD"),
    }


def describe_submission(spec_file: Path, submitted_at: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "via": "runspec submit",
        "source_path": str(spec_file.absolute()),
        "submitted_at": submitted_at,
        "submitted_by": getpass.getuser(),
        "host": socket.gethostname(),
    }
    git = git_info(spec_file)
    if git is not None:
        info["git"] = git
    return info


# What of a provenance leaves the machine (the pushed runspec/provenance.json, the card, the
# receipt): how the spec came and its git facts. The submitting machine's absolute paths, its
# user and its host stay in the job folder.
PUBLIC_KEYS = ("via", "submitted_at", "claimed_at", "sha256", "git")


def _hosted(remote: object) -> bool:
    """A remote on another machine (`https://...`, `ssh://...`, `git@host:path`), not a folder
    of the submitting one (`/home/ada/repo.git`, `file://...`, `../repo`, `~/repo`)."""
    if not isinstance(remote, str) or remote.startswith(("/", ".", "~", "file:")):
        return False
    return "://" in remote or re.match(r"^[^/:]+:", remote) is not None


def public(provenance: dict[str, Any]) -> dict[str, Any]:
    out = {k: provenance[k] for k in PUBLIC_KEYS if k in provenance}
    git = out.get("git")
    if isinstance(git, dict) and "remote" in git and not _hosted(git["remote"]):
        out["git"] = {k: v for k, v in git.items() if k != "remote"}
    source = provenance.get("source_path") or provenance.get("inbox_file")
    if isinstance(source, str) and source:
        out["file"] = Path(source).name  # the spec file's name, never its folder
    return out


# The git facts a receipt names (runspec.push.receipt): enough to find the spec again.
SOURCE_GIT_KEYS = ("remote", "branch", "commit", "path", "blob", "dirty", "author", "subject")


def source(provenance: Any) -> dict[str, Any]:
    """Where a spec came from, as the receipt says it: how it came, its git facts (a followed
    branch or a submit from a checkout) and the file's name, from what `public` lets out."""
    shown = public(provenance) if isinstance(provenance, dict) else {}
    out: dict[str, Any] = {"via": shown.get("via", "inbox")}
    git = shown.get("git")
    if isinstance(git, dict):
        out.update({k: git[k] for k in SOURCE_GIT_KEYS if k in git})
    if "file" in shown:
        out["file"] = shown["file"]
    return out
