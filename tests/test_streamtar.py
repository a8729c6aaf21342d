"""Extraction while downloading (runspec.dataset.streamtar): through the real huggingface_hub
client and the local Hub server on a paced link, and at its own seam with a writer that is
not sequential or that stops half-way. The stream is only a faster road: whatever it cannot
vouch for is thrown away and the two-pass extraction decides."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import threading
import time
from pathlib import Path

import pytest

from runspec.dataset import safetar, staging, streamtar
from runspec.spec.loader import load_spec
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths
from tests.hubserver import HubServer

DATA_YAML = b"path: .\ntrain: images/train\nval: images/train\nnames: [box]\n"
MEMBER = 64 * 1024


def _tar(members: int, evil_at: int | None = None) -> bytes:
    """A dataset tar of `members` image-sized files; `evil_at`: one member there climbs out."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("shapes/data.yaml")
        info.size = len(DATA_YAML)
        tar.addfile(info, io.BytesIO(DATA_YAML))
        for i in range(members):
            name = "shapes/../../escaped.jpg" if i == evil_at else f"shapes/images/train/{i}.jpg"
            info = tarfile.TarInfo(name)
            info.size = MEMBER
            tar.addfile(info, io.BytesIO(i.to_bytes(4, "little") * (MEMBER // 4)))
    return buf.getvalue()


def _spec(tmp_path: Path) -> Spec:
    path = tmp_path / "stream.yaml"
    path.write_text(
        "runspec: 1\nname: stream\ndataset:\n"
        "  hub: {repo: org/shapes, file: shapes.tar}\n  data: shapes/data.yaml\n"
        "train: {model: yolo9-t, epochs: 3, device: cpu}\nbudget: {wall_clock: 10m}\n",
        encoding="utf-8",
    )
    return load_spec(path)


def _leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith(".runspec-tmp-"))


def test_a_hub_tar_is_extracted_while_it_downloads_and_found_done_after(
    tmp_path: Path, hub_server: HubServer
) -> None:
    data = _tar(64)  # 4 MB at 8 MB/s: half a second of download to follow
    hub_server.put_file("org/shapes", "shapes.tar", data, repo_type="dataset")
    hub_server.link_rate = 8e6
    spec = _spec(tmp_path)
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    said: list[str] = []
    found = staging.stage_dataset(spec, paths, progress=said.append)
    assert any("while downloading" in line for line in said), said
    assert found.read_bytes() == DATA_YAML
    train = found.parent / "images" / "train"
    assert len(list(train.iterdir())) == 64
    assert (train / "63.jpg").read_bytes() == (63).to_bytes(4, "little") * (MEMBER // 4)
    assert _leftovers(found.parent.parent) == []
    # The marker is the two-pass road's: a second staging finds the work done, reads nothing.
    said.clear()
    assert staging.stage_dataset(spec, paths, progress=said.append) == found
    assert any("already extracted" in line for line in said), said
    marker = safetar.read_marker(
        safetar.marker_path(found.parent.parent.resolve(), "org/shapes--shapes.tar")
    )
    assert marker is not None and marker["sha256"] == hashlib.sha256(data).hexdigest()


def test_a_hostile_member_in_the_stream_writes_nothing_and_reads_as_before(
    tmp_path: Path, hub_server: HubServer
) -> None:
    hub_server.put_file("org/shapes", "shapes.tar", _tar(64, evil_at=40), repo_type="dataset")
    hub_server.link_rate = 8e6
    spec = _spec(tmp_path)
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    with pytest.raises(safetar.UnsafeTarError, match=r"'shapes/\.\./\.\./escaped\.jpg'.*'\.\.'"):
        staging.stage_dataset(spec, paths, progress=lambda _line: None)
    root = tmp_path / "state" / "data"
    assert sorted(p.name for p in root.iterdir()) == [], "something was placed"
    assert not list(tmp_path.rglob("escaped.jpg"))


def _follow(tmp_path: Path, data: bytes, write: object) -> tuple[streamtar.StreamExtract, Path]:
    """A StreamExtract following a writer thread that plays huggingface_hub's part: `write`
    fills `<etag>.<8 hex>.incomplete`, then it is renamed into the blob."""
    etag = hashlib.sha256(data).hexdigest()
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    dest = tmp_path / "data"
    stream = streamtar.StreamExtract(streamtar.Blob(blobs, etag, len(data)), dest, "k", 10_000)
    return stream, blobs / etag


def _sequential(path: Path, data: bytes) -> None:
    with path.open("wb") as fh:
        for i in range(0, len(data), 256 * 1024):
            fh.write(data[i : i + 256 * 1024])
            fh.flush()
            time.sleep(0.01)


def _out_of_order(path: Path, data: bytes) -> None:
    # As a chunked downloader might: the file at its full size first, then filled from the end.
    with path.open("wb") as fh:
        fh.truncate(len(data))
        fh.flush()
        time.sleep(0.1)
        half = len(data) // 2
        fh.seek(half)
        fh.write(data[half:])
        fh.seek(0)
        fh.write(data[:half])


@pytest.mark.parametrize("writer", [_sequential, _out_of_order])
def test_only_a_stream_equal_to_the_blob_is_placed(tmp_path: Path, writer: object) -> None:
    data = _tar(40)
    stream, blob = _follow(tmp_path, data, writer)
    incomplete = blob.with_name(f"{blob.name}.0123abcd.incomplete")
    with stream:
        thread = threading.Thread(target=writer, args=(incomplete, data))  # type: ignore[arg-type]
        thread.start()
        thread.join()
        os.replace(incomplete, blob)
        result = stream.finish(blob)
    dest = tmp_path / "data"
    if writer is _sequential:
        assert result is not None and result.sha256 == hashlib.sha256(data).hexdigest()
        assert (dest / "shapes" / "data.yaml").read_bytes() == DATA_YAML
    else:
        assert result is None, "a stream that read zeros was placed"
        assert stream.failure is not None
        assert sorted(p.name for p in dest.iterdir()) == []


def test_a_download_that_fails_half_way_leaves_nothing(tmp_path: Path) -> None:
    data = _tar(40)
    stream, blob = _follow(tmp_path, data, None)
    incomplete = blob.with_name(f"{blob.name}.0123abcd.incomplete")
    with stream:
        incomplete.write_bytes(data[: len(data) // 2])
        time.sleep(0.2)  # the follower is now waiting at the end of what was written
        incomplete.unlink()  # huggingface_hub removes its temporary file when the GET fails
    # Leaving the block without finish() is what staging does when download_tar raises.
    assert not stream.thread.is_alive()
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == []
