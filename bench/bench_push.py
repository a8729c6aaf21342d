"""Push figures against the local Hub server (tests/hubserver.py); prints them, asserts nothing.

1. Time: a checkpoint (default 200 MB) through runspec's Hub target (hash the staged copy,
   one commit, verify at the commit) versus a plain `HfApi.upload_file` of the same file.
   Goal: median ratio <= 1.10.
2. Memory: peak RSS of a process that pushes a small and a large file; goal: it does not grow
   with the file size (the file is streamed, never read whole).
3. The read-back before a machine ends (download the final weights at the verified commit and
   hash them): its time against the upload's of the same file; goal: under half. Its memory
   is in the runspec figures of 2 (flat in the file size).
4. An unchanged re-push through the Pusher: LFS bytes received by the server. Goal: 0.
5. What importing huggingface_hub costs a long-lived process (RSS), the case for pushing from
   a thread of the daemon rather than a child process.

    .venv/bin/python bench/bench_push.py [--mb 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TOKEN = f"hf_bench{secrets.token_hex(16)}"


def client_env(url: str, home: Path) -> dict[str, str]:
    return {
        "HF_ENDPOINT": url,
        "HF_TOKEN": TOKEN,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HOME": str(home),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }


def make_file(path: Path, mb: int) -> None:
    """A checkpoint-shaped file: a zip with data.pkl and `mb` MB of random data."""
    block = os.urandom(1 << 20)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", b"bench")
        with archive.open("archive/data/0", "w", force_zip64=True) as member:
            for i in range(mb):
                member.write(i.to_bytes(8, "little") + block[8:])


def child(method: str, path: Path, repo: str) -> None:
    """One upload in this process; prints seconds and peak RSS as JSON."""
    from huggingface_hub import HfApi

    from runspec.push.base import StagedFile
    from runspec.push.hub import HubTarget
    from runspec.push.manifest import ManifestEntry, digest_file

    api = HfApi(endpoint=os.environ["HF_ENDPOINT"])
    api.create_repo(repo, exist_ok=True)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    read_back = 0.0
    if method == "plain":
        api.upload_file(path_or_fileobj=str(path), path_in_repo="weights/last.pt", repo_id=repo)
    else:
        target = HubTarget(repo)
        digest = digest_file(path)
        entry = ManifestEntry("weights/last.pt", digest.size, digest.sha256, 1, "", digest.blob_id)
        item = StagedFile(entry, path)
        commit = target.push([item], "runspec: epoch 1")
        problems = target.verify(commit, [entry], [item])
        assert not problems, problems
        started = time.perf_counter()
        problems = target.read_back(commit, [entry])
        read_back = time.perf_counter() - started
        assert not problems, problems
    seconds = time.perf_counter() - start - read_back
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "seconds": seconds,
                "read_back": read_back,
                "rss_mb": rss / 1024,
                "rss_before_mb": rss_before / 1024,
            }
        )
    )


def run_child(method: str, path: Path, repo: str, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", method, "--file", str(path), "--repo", repo],
        env={**os.environ, **env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def forget_objects(server: object) -> None:
    """Empty the server's LFS store, so the next upload of the same bytes sends them all."""
    storage: Path = server.storage  # type: ignore[attr-defined]
    shutil.rmtree(storage / "lfs")
    (storage / "lfs").mkdir()
    server.repos.clear()  # type: ignore[attr-defined]
    server.lfs_bytes_received = 0  # type: ignore[attr-defined]


def time_and_memory(server: object, work: Path, mb: int, repeat: int, env: dict[str, str]) -> None:
    big = work / "big.pt"
    small = work / "small.pt"
    make_file(big, mb)
    make_file(small, max(1, mb // 8))
    times: dict[str, list[float]] = {"plain": [], "runspec": [], "read_back": []}
    rss: dict[str, dict[str, float]] = {"plain": {}, "runspec": {}}
    for i in range(repeat):
        # Alternate which goes first, so page cache and warm-up favour neither.
        for method in ("plain", "runspec") if i % 2 == 0 else ("runspec", "plain"):
            forget_objects(server)
            got = run_child(method, big, f"bench/{method}{i}", env)
            times[method].append(got["seconds"])
            if method == "runspec":
                times["read_back"].append(got["read_back"])
            rss[method]["big"] = max(rss[method].get("big", 0.0), got["rss_mb"])
    for method in ("plain", "runspec"):
        forget_objects(server)
        rss[method]["small"] = run_child(method, small, f"bench/{method}-small", env)["rss_mb"]
    plain, ours = statistics.median(times["plain"]), statistics.median(times["runspec"])
    print(f"file: {big.stat().st_size / 1e6:.0f} MB, {repeat} runs each (medians)")
    print(f"  plain HfApi.upload_file:        {plain:.2f} s   {times['plain']}")
    print(f"  runspec Hub target (+hash, verify): {ours:.2f} s   {times['runspec']}")
    print(f"  time ratio runspec/plain: {ours / plain:.3f} (goal <= 1.10)")
    back = statistics.median(times["read_back"])
    print(f"  read-back (download at the commit, hash): {back:.2f} s   {times['read_back']}")
    print(f"  time ratio read-back/upload: {back / ours:.3f} (goal < 0.5)")
    small_mb = small.stat().st_size / 1e6
    for method in ("plain", "runspec"):
        print(
            f"  peak RSS {method}: {rss[method]['small']:.0f} MB for {small_mb:.0f} MB, "
            f"{rss[method]['big']:.0f} MB for {big.stat().st_size / 1e6:.0f} MB"
        )


def unchanged_repush(server: object, work: Path, mb: int) -> None:
    from runspec.clock import SYSTEM
    from runspec.push import Pusher
    from runspec.run.accept import accept
    from runspec.spec.loader import load_spec
    from runspec.store.owner import RunOwner
    from runspec.store.paths import RunPaths
    from runspec.store.state import RecordStore
    from runspec.timers import Timers
    from runspec.trainer.control import EpochMarker, FileStat, write_epoch_marker

    forget_objects(server)
    spec_file = work / "bench.yaml"
    spec_file.write_text(
        "runspec: 1\nname: bench\ndataset:\n  synthetic: {}\ntrain:\n  model: yolo9-t\n"
        "  epochs: 2\n  device: cpu\n  save_period: 1\npush:\n  hub: {repo: bench/repush}\n"
        "budget:\n  wall_clock: 1h\n"
    )
    spec = load_spec(spec_file)
    state = work / "state"
    record = accept(spec, state)
    paths = RunPaths.for_spec(spec, state)
    weights = paths.run_dir / "weights"
    weights.mkdir(parents=True)
    make_file(weights / "last.pt", mb)
    make_file(weights / "best.pt", mb)  # torch.save names the archive after the file: never equal
    write_epoch_marker(
        paths.control_dir,
        EpochMarker(
            epoch=1,
            total_epochs=2,
            epoch_seconds=1.0,
            validated=True,
            time=time.time(),
            files={f"weights/{n}": FileStat.of(weights / n) for n in ("last.pt", "best.pt")},
        ),
    )
    lines: list[str] = []
    pusher = Pusher(
        spec,
        paths,
        RunOwner(RecordStore(state), record),
        progress=lines.append,
        min_interval=0.0,
        timers=Timers(SYSTEM),  # only pushed now: no push.every here
    )
    pusher.start()
    try:
        first = pusher.push_now(final=False, timeout=600)
        sent_first = server.lfs_bytes_received  # type: ignore[attr-defined]
        (paths.run_dir / "train.log").write_text("one more line\n")
        second = pusher.push_now(final=True, timeout=600)
        sent_second = server.lfs_bytes_received - sent_first  # type: ignore[attr-defined]
    finally:
        pusher.stop()
    assert first is not None and second is not None
    print("unchanged re-push through the Pusher (last.pt and best.pt unchanged, a log changed):")
    print(f"  first push:  {sent_first / 1e6:.1f} MB of LFS bytes, {first.seconds:.2f} s")
    print(
        f"  second push: {sent_second} LFS bytes (goal 0), {second.bytes} bytes in all, "
        f"{second.seconds:.2f} s"
    )


def import_cost() -> None:
    code = (
        "import resource, time; t = time.perf_counter(); r0 = resource.getrusage("
        "resource.RUSAGE_SELF).ru_maxrss; import runspec.push.hub, huggingface_hub; "
        "print(time.perf_counter() - t, "
        "r0 / 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    seconds, before, after = (float(x) for x in out.stdout.split())
    print(
        f"importing the Hub target (huggingface_hub): {seconds:.2f} s, "
        f"peak RSS {before:.0f} MB -> {after:.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", choices=("plain", "runspec"))
    parser.add_argument("--file", type=Path)
    parser.add_argument("--repo")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.file, args.repo)
        return
    from tests.hubserver import HubServer

    with tempfile.TemporaryDirectory(prefix="bench-push-") as tmp:
        work = Path(tmp)
        server = HubServer(work / "hub", token=TOKEN).start()
        env = client_env(server.url, work / "hf-home")
        os.environ.update(env)  # before huggingface_hub is imported here (the re-push part)
        try:
            import_cost()
            time_and_memory(server, work, args.mb, args.repeat, env)
            unchanged_repush(server, work, args.mb)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
