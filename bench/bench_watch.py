"""The watcher's figures against the local Hub server (tests/hubserver.py); prints them,
asserts nothing.

1. One `runspec watch --once ORG` pass over a fleet of N runs (default 100), all healthy, as
   the real command in a process of its own: its wall time and the Hub requests it made (the
   listing, then a repo_info and one lease read per run).
2. The lease's cost on the box: the requests and commits of one renewal (read the head and the
   lease, preupload, commit), and the commits an hour at the default 5m lease and at 10 s.

    .venv/bin/python bench/bench_watch.py [--runs 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.hubserver import HubServer  # noqa: E402

TOKEN = f"hf_bench{secrets.token_hex(16)}"
CARD = b"---\ntags:\n- runspec\n---\n# a run\n"


WATCH_KEY = secrets.token_hex(32)  # RUNSPEC_WATCH_KEY of the boxes and the watcher


def lease(repo: str, now: float) -> bytes:
    """A healthy run's lease, sealed for `repo` as its box seals it; each on its own instance."""
    from runspec.clock import utc_iso
    from runspec.watch.seal import seal

    name = repo.split("/")[1]
    doc = {
        "schema": 1,
        "run": name,
        "vouched_until": utc_iso(now + 600),
        "state": "training",
        "epoch": 3,
        "renewed_at": utc_iso(now),
        "lease_s": 300.0,
        "final_verified": False,
        "deadline": utc_iso(now + 3600),
        "provider": "vast",
        "instance": f"{name}-1",
    }
    return json.dumps({**doc, "seal": seal(WATCH_KEY.encode(), repo, doc)}).encode()


def env(hub: HubServer, home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"], "HOME": str(home), "HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN,
        "HF_HUB_DISABLE_XET": "1", "HF_HOME": str(home / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1",
        "RUNSPEC_WATCH_KEY": WATCH_KEY,
    }  # fmt: skip


def fleet_pass(runs: int, tmp: Path) -> tuple[float, Counter[str]]:
    hub = HubServer(tmp / f"hub-{time.monotonic_ns()}", TOKEN).start()
    try:
        now = time.time()
        for i in range(runs):
            hub.put_file(f"fleet/run{i}", "README.md", CARD, repo_type="model")
            hub.put_file(
                f"fleet/run{i}", "runspec/lease.json", lease(f"fleet/run{i}", now), "model"
            )
        before = len(hub.log)
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "runspec", "watch", "--once", "--json", "fleet"],
            env=env(hub, tmp), capture_output=True, text=True, check=False,
        )  # fmt: skip
        took = time.monotonic() - start
        if proc.returncode != 0:
            raise SystemExit(f"the watcher failed: {proc.stderr}")
        seen = json.loads(proc.stdout)["runs"]
        assert len(seen) == runs and all(s["verdict"] == "alive" for s in seen)
        return took, Counter(r.op for r in hub.log[before:])
    finally:
        hub.stop()


def renewal(tmp: Path) -> Counter[str]:
    from huggingface_hub import HfApi

    from runspec.watch.lease import HubLease, Lease

    hub = HubServer(tmp / "hub-renew", TOKEN).start()
    try:
        hub.put_file("box/run", "runspec/lease.json", lease("box/run", time.time()), "model")
        os.environ.update(env(hub, tmp))
        lease_file = HubLease("box/run", HfApi(endpoint=hub.url, token=TOKEN))
        before = len(hub.log)
        head, current = lease_file.read()
        assert current is not None
        lease_file.write(Lease.from_json({**current.to_json(), "epoch": 4}), head, "renew")
        return Counter(r.op for r in hub.log[before:])
    finally:
        hub.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        passes = [fleet_pass(args.runs, Path(tmp)) for _ in range(args.repeat)]
        times = [t for t, _ in passes]
        ops = passes[0][1]
        print(f"watch --once over {args.runs} runs: median {statistics.median(times):.2f} s "
              f"(of {', '.join(f'{t:.2f}' for t in times)}); Hub requests {sum(ops.values())}: "
              f"{dict(ops)}")  # fmt: skip
        one = renewal(Path(tmp))
        print(f"one renewal: {sum(one.values())} Hub requests ({dict(one)}), "
              f"{one['commit']} commit")  # fmt: skip
        for lease_s in (300.0, 10.0):
            print(f"lease {lease_s:g} s: {3600 / lease_s:.0f} commits an hour per run")


if __name__ == "__main__":
    main()
