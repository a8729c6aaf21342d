"""What "verified" costs per push on the Xet path; prints medians, asserts nothing.

Against the local Hub with its Xet stand-in (tests/hubserver.py, tests/hubxet.py: hf_xet's own
chunking and content store, the bytes rebuilt by hf_xet for the download), one checkpoint-sized
file (default 100 MB of random data, so neither compression nor deduplication helps), each
round a new file:

1. push: `HubTarget.push` (one commit; under Xet hf_xet hashes the bytes it sends);
2. verify: `HubTarget.verify` at that commit: paths-info, then the read-back of the file (the
   download through the resolve redirect, hashed as it streams);
3. the ratio verify / push.

The stand-in has no network between client and store: on a rented box the read-back is one
more download of each checkpoint, at the link's download speed.

    .venv/bin/python bench/bench_verify.py [--mb 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from tests.hubserver import HubServer

    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        root = Path(tmp)
        token = f"hf_bench{secrets.token_hex(16)}"
        server = HubServer(root / "hub", token=token).start()
        server.enable_xet()
        os.environ.update(
            {
                "HF_ENDPOINT": server.url,
                "HF_TOKEN": token,
                "HF_HUB_DISABLE_XET": "0",
                "HF_HOME": str(root / "hf-home"),
                "HF_HUB_DISABLE_TELEMETRY": "1",
                "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            }
        )
        from runspec.push.base import StagedFile
        from runspec.push.hub import HubTarget
        from runspec.push.manifest import ManifestEntry, digest_file

        target = HubTarget("bench/verify")
        pushes, verifies = [], []
        try:
            for i in range(args.repeat):
                path = root / f"epoch_{i}.pt"
                with path.open("wb") as fh:
                    for _ in range(args.mb):
                        fh.write(os.urandom(1 << 20))
                digest = digest_file(path)
                entry = ManifestEntry("weights/last.pt", digest.size, digest.sha256, i, "")
                staged = StagedFile(entry, path)
                start = time.perf_counter()
                commit = target.push([staged], f"bench {i}")
                pushed = time.perf_counter()
                problems = target.verify(commit, [entry], [staged])
                verified = time.perf_counter()
                if problems:
                    raise SystemExit(f"not verified: {problems}")
                pushes.append(pushed - start)
                verifies.append(verified - pushed)
                path.unlink()
        finally:
            server.stop()
    push_s, verify_s = statistics.median(pushes), statistics.median(verifies)
    print(f"file: {args.mb} MB, {args.repeat} rounds, Xet on (local stand-in)")
    print(f"push   median {push_s:.2f} s ({args.mb / push_s:.0f} MB/s)")
    print(f"verify median {verify_s:.2f} s ({args.mb / verify_s:.0f} MB/s read back and hashed)")
    print(f"verify / push: {verify_s / push_s:.2f}")


if __name__ == "__main__":
    main()
