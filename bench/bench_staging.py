"""Dataset staging against a plain download of the same bytes, through the local Hub server.

Staging (runspec.dataset.staging.stage_dataset) downloads the tar into the Hub cache
(huggingface_hub, resumable, what a restart finds again), then extracts it with
runspec.dataset.safetar: a second pass over the disk that hashes and checks every member. The plain
download is the same `hf_hub_download` into a fresh cache, without the extraction. The tar holds
image-sized members of random bytes and a data.yaml. Each pass starts from an empty cache and an
empty data folder; the figures are medians of --runs. Goal: staging within 15 % of the download.

Two link rates: the loopback's own speed (the disk's pass shows in full) and --link-mbs
(megabytes per second, as a rented machine's link; the server paces every LFS body to it).
The default 500 MB tar is a quarter of the issue's 2 GB: this machine's two cores and disk are
shared; pass --mb 2000 for the full size (both passes scale with the bytes).

    .venv/bin/python bench/bench_staging.py [--mb 500] [--runs 3] [--link-mbs 50]
"""

from __future__ import annotations

import argparse
import io
import os
import secrets
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TOKEN = f"hf_bench{secrets.token_hex(16)}"
MEMBER = 256 * 1024  # bytes per image-like member
DATASET_REPO = "bench/staging"
TAR_NAME = "data.tar"


def make_tar(path: Path, mb: int) -> None:
    """`mb` MB of image-sized members under shapes/images/train, and shapes/data.yaml."""
    block = os.urandom(MEMBER)
    with tarfile.open(path, "w") as tar:
        text = b"path: .\ntrain: images/train\nval: images/train\nnames: [a]\n"
        info = tarfile.TarInfo("shapes/data.yaml")
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
        for i in range(mb * (1 << 20) // MEMBER):
            info = tarfile.TarInfo(f"shapes/images/train/{i:06d}.jpg")
            info.size = MEMBER
            tar.addfile(info, io.BytesIO(i.to_bytes(8, "little") + block[8:]))


def client_env(url: str, home: Path) -> dict[str, str]:
    return {
        "HF_ENDPOINT": url,
        "HF_TOKEN": TOKEN,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HOME": str(home),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }


def start_server(work: Path) -> Any:
    from tests.hubserver import HubServer

    server = HubServer(work / "hub", TOKEN).start()
    os.environ.update(client_env(server.url, work / "hf"))
    return server


def stage_once(work: Path) -> float:
    """Seconds for runspec's staging from an empty cache into an empty data folder."""
    from runspec.dataset.staging import stage_dataset
    from runspec.spec.loader import load_spec_text
    from runspec.store.paths import RunPaths

    home, data = work / "hf-stage", work / "data"
    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(data, ignore_errors=True)
    spec = load_spec_text(
        "runspec: 1\nname: stage\n"
        f"dataset: {{hub: {{repo: {DATASET_REPO}, file: {TAR_NAME}}}, data: shapes/data.yaml,"
        f" extract_to: {data}}}\n"
        "train: {model: yolo9-t, epochs: 1, device: cpu}\nbudget: {wall_clock: 1h}\n"
        f"env: {{HF_HOME: {home}}}\n",
        "bench.yaml",
    )
    paths = RunPaths.for_spec(spec, work / "state")
    start = time.perf_counter()
    stage_dataset(spec, paths, progress=lambda _line: None)
    return time.perf_counter() - start


def download_once(work: Path) -> float:
    """Seconds for a plain hf_hub_download of the same tar into an empty cache."""
    from huggingface_hub import hf_hub_download

    cache = work / "hf-plain"
    shutil.rmtree(cache, ignore_errors=True)
    start = time.perf_counter()
    hf_hub_download(DATASET_REPO, TAR_NAME, repo_type="dataset", cache_dir=str(cache))
    return time.perf_counter() - start


def measure(server: Any, work: Path, runs: int, link_rate: float | None) -> dict[str, float]:
    """Median staging and plain-download seconds at `link_rate` (bytes/s; None: loopback)."""
    server.link_rate = link_rate
    stage: list[float] = []
    plain: list[float] = []
    for i in range(runs):
        # Alternate which goes first, so the page cache favours neither.
        order = (stage_once, download_once) if i % 2 == 0 else (download_once, stage_once)
        for step in order:
            (stage if step is stage_once else plain).append(step(work))
    server.link_rate = None
    return {"stage_s": statistics.median(stage), "plain_s": statistics.median(plain)}


def seed(server: Any, work: Path, mb: int) -> int:
    tar = work / TAR_NAME
    make_tar(tar, mb)
    server.put_path(DATASET_REPO, TAR_NAME, tar)
    size = tar.stat().st_size
    tar.unlink()
    return size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=500, help="the tar's size in MB")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--link-mbs", type=float, default=50.0, help="link rate, MB/s")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-staging-") as tmp:
        work = Path(tmp)
        server = start_server(work)
        try:
            size = seed(server, work, args.mb)
            print(f"tar: {size / 1e6:.0f} MB, {size // MEMBER} members; medians of {args.runs}")
            print("| link | plain download | staging | staging / download |")
            print("| --- | --- | --- | --- |")
            for label, rate in (("loopback", None), (f"{args.link_mbs:g} MB/s", args.link_mbs)):
                got = measure(server, work, args.runs, None if rate is None else rate * 1e6)
                ratio = got["stage_s"] / got["plain_s"]
                print(
                    f"| {label} | {got['plain_s']:.1f} s ({size / 1e6 / got['plain_s']:.0f} "
                    f"MB/s) | {got['stage_s']:.1f} s | {ratio:.2f} |"
                )
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
