"""Helpers for the watcher's tests: leases seeded as a box writes them, `runspec watch --once`
as a real process with its own HOME and only the Hub's variables and the provider's key, and
every process of a "box" (a run started with a marker in its environment) to freeze or end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from runspec.clock import utc_iso
from runspec.store.paths import STATE_VARIABLE
from runspec.watch.seal import KEY_VARIABLE, seal
from tests.fixtures_providers import StandIn
from tests.hubserver import HubServer

REPO = "me/hung"
LEASE = "runspec/lease.json"
# The watch key the boxes of these tests and their watcher share (RUNSPEC_WATCH_KEY).
WATCH_KEY = "k" * 16 + "test-watch-key-of-these-boxes"


def lease_doc(**over: Any) -> dict[str, Any]:
    now = time.time()
    doc: dict[str, Any] = {
        "schema": 1, "run": "hung", "vouched_until": utc_iso(now + 600), "state": "training",
        "epoch": 3, "renewed_at": utc_iso(now - 10), "lease_s": 300.0,
        "newest_local": "epoch_3.pt", "newest_verified": "epoch_2.pt", "final_verified": False,
        "deadline": utc_iso(now + 3600), "provider": "vast", "instance": "4242",
    }  # fmt: skip
    doc.update(over)
    return doc


def expired(**over: Any) -> dict[str, Any]:
    """A lease whose box stopped vouching longer than a lease (the default grace) ago."""
    return lease_doc(vouched_until=utc_iso(time.time() - 400), **over)


def sealed(doc: dict[str, Any], repo: str = REPO, key: str = WATCH_KEY) -> dict[str, Any]:
    """`doc` sealed for `repo` as a box holding `key` seals it."""
    fields = {k: v for k, v in doc.items() if k != "seal"}
    return {**fields, "seal": seal(key.encode(), repo, fields)}


def seed(
    hub: HubServer, doc: dict[str, Any] | bytes, repo: str = REPO, *, seal_it: bool = True
) -> None:
    """`doc` as the lease of `repo`, sealed by a box that holds the watch key unless
    `seal_it` is false (bytes go as they are)."""
    if not isinstance(doc, bytes):
        doc = json.dumps(sealed(doc, repo) if seal_it else doc).encode()
    hub.put_file(repo, LEASE, doc, repo_type="model")


def watcher_env(hub_env: dict[str, str], standin: StandIn, home: Path) -> dict[str, str]:
    home.mkdir(exist_ok=True)
    # Its own state folder (as root the default is /var/lib/runspec, shared by every test's
    # watchers at once: one watcher's memory of an outage written over by another's).
    return {
        "PATH": os.environ["PATH"], "HOME": str(home), **hub_env,
        STATE_VARIABLE: str(home / "state"),
        "VAST_API_KEY": "vast-watcher-key", "RUNSPEC_VAST_API": standin.url,
        KEY_VARIABLE: WATCH_KEY,
    }  # fmt: skip


def watch(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "runspec", "watch", "--once", "--json", *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def result(proc: subprocess.Popen[str]) -> tuple[int, dict[str, Any], str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, json.loads(out), err


def lease_at_hub(hub: HubServer, repo: str = REPO) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(hub.read_file(repo, LEASE, repo_type="model"))
    return data


def box_pids(root: int, marker: str) -> set[int]:
    """Every process of a box: `root`'s descendants and whatever carries `marker` in its
    environment (a detached child that left the tree)."""
    parents: dict[int, int] = {}
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        with suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
        with suppress(OSError):
            if marker.encode() in (entry / "environ").read_bytes():
                found.add(pid)
    found.add(root)
    grew = True
    while grew:
        more = {p for p, pp in parents.items() if pp in found and p not in found}
        found |= more
        grew = bool(more)
    return {p for p in found if p in parents}


def signal_all(pids: set[int], signum: int) -> None:
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signum)
