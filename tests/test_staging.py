"""Dataset staging: from the Hub through the real huggingface_hub client and the local Hub
server, from a path, and generated; cached and idempotent."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from runspec.dataset import staging
from runspec.spec.loader import load_spec
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths
from tests.hubserver import HubServer

DATA_YAML = b"path: .\ntrain: images/train\nval: images/val\nnames: [box]\n"


def _tar_bytes() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in [
            ("shapes/data.yaml", DATA_YAML),
            ("shapes/images/train/a.jpg", b"\xff\xd8" + b"\0" * 64),
            ("shapes/labels/train/a.txt", b"0 0.5 0.5 0.2 0.2\n"),
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _spec(tmp_path: Path, dataset: str, name: str = "stage") -> Spec:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"runspec: 1\nname: {name}\ndataset:\n{dataset}"
        "train: {model: yolo9-t, epochs: 3, device: cpu}\nbudget: {wall_clock: 10m}\n",
        encoding="utf-8",
    )
    return load_spec(path)


def _downloads(server: HubServer) -> int:
    return sum(1 for r in server.log if r.op == "resolve" and r.method == "GET")


def test_hub_tar_is_downloaded_extracted_and_served_from_the_cache_after(
    tmp_path: Path, hub_server: HubServer
) -> None:
    hub_server.put_file("org/shapes", "shapes.tar.gz", _tar_bytes(), repo_type="dataset")
    spec = _spec(
        tmp_path,
        "  hub: {repo: org/shapes, file: shapes.tar.gz}\n  data: shapes/data.yaml\n",
    )
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    said: list[str] = []
    data = staging.stage_dataset(spec, paths, progress=said.append)
    assert data == tmp_path / "state" / "data" / "shapes" / "data.yaml"
    assert data.read_bytes() == DATA_YAML
    assert (data.parent / "labels" / "train" / "a.txt").is_file()
    assert _downloads(hub_server) == 1
    # A download over in a moment says no progress lines, only what it did and how fast.
    ready = [line for line in said if line.startswith("dataset tar ready:")]
    assert len(ready) == 1 and "downloaded" in ready[0] and "/s)" in ready[0], said
    assert not (paths.transfer_file).exists()  # `runspec status` shows no transfer now
    # The tar sits in the Hub cache under HF_HOME, where a restarted run finds it.
    cached = list((tmp_path / "hf-home" / "hub").rglob("shapes.tar.gz"))
    assert cached, "the tar is not in the Hub cache under HF_HOME"

    # Second run: nothing downloaded, nothing extracted again.
    said.clear()
    assert staging.stage_dataset(spec, paths, progress=said.append) == data
    assert _downloads(hub_server) == 1
    assert any("already extracted" in line for line in said), said
    assert any("from the cache" in line for line in said), said

    # A machine that kept HF_HOME (a volume) but lost the data: re-extracted from the cache.
    fresh = RunPaths(paths.state, paths.name, paths.project, tmp_path / "elsewhere")
    again = staging.stage_dataset(spec, fresh, progress=said.append)
    assert again.read_bytes() == DATA_YAML
    assert _downloads(hub_server) == 1


def test_a_private_repo_needs_the_token(
    tmp_path: Path, hub_server: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub_server.put_file("org/private", "d.tar.gz", _tar_bytes(), repo_type="dataset")
    spec = _spec(tmp_path, "  hub: {repo: org/private, file: d.tar.gz}\n  data: shapes/data.yaml\n")
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(staging.StagingError, match="org/private"):
        staging.stage_dataset(spec, paths, progress=lambda _: None)
    assert not (tmp_path / "state" / "data" / "shapes").exists()


def test_missing_file_and_missing_data_yaml_say_what_to_fix(
    tmp_path: Path, hub_server: HubServer
) -> None:
    hub_server.put_file("org/shapes", "shapes.tar.gz", _tar_bytes(), repo_type="dataset")
    wrong_file = _spec(tmp_path, "  hub: {repo: org/shapes, file: nope.tar}\n  data: x.yaml\n")
    paths = RunPaths.for_spec(wrong_file, tmp_path / "state")
    with pytest.raises(staging.StagingError, match=r"nope\.tar is not in dataset repo org/shapes"):
        staging.stage_dataset(wrong_file, paths, progress=lambda _: None)
    # ... and what the repo does hold, so the fix needs no trip to the Hub's Files tab.
    with pytest.raises(staging.StagingError, match=r"; it holds shapes\.tar\.gz$"):
        staging.stage_dataset(wrong_file, paths, progress=lambda _: None)
    wrong_yaml = _spec(
        tmp_path, "  hub: {repo: org/shapes, file: shapes.tar.gz}\n  data: shapes/dat.yaml\n"
    )
    with pytest.raises(staging.StagingError, match=r"'shapes/dat\.yaml' is not in the extracted"):
        staging.stage_dataset(wrong_yaml, paths, progress=lambda _: None)


def test_a_path_dataset_must_exist(tmp_path: Path) -> None:
    present = tmp_path / "mine" / "data.yaml"
    present.parent.mkdir()
    present.write_bytes(DATA_YAML)
    spec = _spec(tmp_path, f"  path: {present}\n")
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    assert staging.stage_dataset(spec, paths, progress=lambda _: None) == present
    gone = _spec(tmp_path, f"  path: {tmp_path / 'gone' / 'data.yaml'}\n")
    with pytest.raises(staging.StagingError, match="does not exist on this machine"):
        staging.stage_dataset(gone, paths, progress=lambda _: None)


def test_a_synthetic_dataset_is_generated_once(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "  synthetic: {train: 4, val: 2, imgsz: 64, seed: 3}\n")
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    data = staging.stage_dataset(spec, paths, progress=lambda _: None)
    assert data.parent == tmp_path / "state" / "data" / "synthetic-3-4-2-64-3"
    assert data == staging.expected_data_yaml(spec, paths)
    assert len(list((data.parent / "images").rglob("*.*"))) == 6
    before = data.stat().st_mtime_ns
    assert staging.stage_dataset(spec, paths, progress=lambda _: None) == data
    assert data.stat().st_mtime_ns == before


def test_only_what_a_fixed_spec_mends_is_a_permanent_staging_failure(
    tmp_path: Path, hub_server: HubServer
) -> None:
    """A permanent failure marks the run terminal: never resumed, never retried by an engine.
    A dataset folder this machine lacks (a fresh one may have it) is not; a missing repo is."""
    spec = _spec(tmp_path, f"  path: {tmp_path / 'elsewhere' / 'data.yaml'}\n")
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    with pytest.raises(staging.StagingError) as caught:
        staging.stage_dataset(spec, paths, progress=lambda _line: None)
    assert caught.value.permanent is False, caught.value
    spec = _spec(tmp_path, "  hub: {repo: org/none, file: x.tar}\n  data: d/data.yaml\n", "gone")
    with pytest.raises(staging.StagingError) as caught:
        staging.stage_dataset(spec, RunPaths.for_spec(spec, tmp_path / "state"), print)
    assert caught.value.permanent is True, caught.value


def test_the_repos_files_are_said_bounded_and_printable(hub_server: HubServer) -> None:
    from runspec.dataset.repofiles import SHOWN, repo_files
    from runspec.spec.model import HubDataset

    for n in range(SHOWN + 2):
        hub_server.put_file("org/many", f"part-{n:02d}.tar", b"x", repo_type="dataset")
    hub_server.put_file("org/many", "evil\x1b[2J.tar", b"x", repo_type="dataset")
    said = repo_files(HubDataset(repo="org/many", file="nope.tar"))
    assert said.startswith("; it holds evil\\x1b[2J.tar, part-00.tar"), said
    assert said.endswith("part-08.tar (and 3 more)"), said
    assert "\x1b" not in said
