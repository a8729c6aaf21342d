"""The local Hub server against the real huggingface_hub client: what the other tests rely on."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError

from tests.hubserver import HubServer, blob_id

BIG = 12 * 1000 * 1000  # over the 10 MB line: takes the LFS path


def _api() -> HfApi:
    return HfApi(endpoint=os.environ["HF_ENDPOINT"])


def test_upload_small_and_lfs_files_then_read_them_back(
    hub_server: HubServer, tmp_path: Path
) -> None:
    api = _api()
    api.create_repo("me/run", private=True)
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(BIG))
    api.upload_file(path_or_fileobj=b"hello\n", path_in_repo="notes.txt", repo_id="me/run")
    info = api.upload_file(
        path_or_fileobj=str(big), path_in_repo="weights/big.pt", repo_id="me/run"
    )

    assert hub_server.read_file("me/run", "weights/big.pt") == big.read_bytes()
    assert hub_server.read_file("me/run", "notes.txt") == b"hello\n"
    assert hub_server.lfs_bytes_received == BIG
    remote = {
        e.path: e
        for e in api.get_paths_info("me/run", ["weights/big.pt", "notes.txt"], revision=info.oid)
    }
    assert remote["weights/big.pt"].lfs is not None
    assert remote["weights/big.pt"].lfs.sha256 == hashlib.sha256(big.read_bytes()).hexdigest()
    assert remote["notes.txt"].lfs is None
    assert remote["notes.txt"].blob_id == blob_id(b"hello\n")
    assert sorted(api.list_repo_files("me/run")) == ["notes.txt", "weights/big.pt"]
    assert hub_server.repo("me/run").private


def test_same_lfs_object_is_not_sent_twice(hub_server: HubServer, tmp_path: Path) -> None:
    api = _api()
    api.create_repo("me/run")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(BIG))
    api.upload_file(path_or_fileobj=str(big), path_in_repo="a.pt", repo_id="me/run")
    api.upload_file(path_or_fileobj=str(big), path_in_repo="b.pt", repo_id="me/run")
    assert hub_server.lfs_bytes_received == BIG
    assert hub_server.files("me/run") == ["a.pt", "b.pt"]


def test_dataset_download_at_a_revision(hub_server: HubServer, tmp_path: Path) -> None:
    first = hub_server.put_file("org/data", "data.tar", b"one" * 10, repo_type="dataset")
    hub_server.put_file("org/data", "data.tar", b"two" * 10, repo_type="dataset")
    old = hf_hub_download(
        "org/data", "data.tar", repo_type="dataset", revision=first, cache_dir=tmp_path / "c"
    )
    new = hf_hub_download("org/data", "data.tar", repo_type="dataset", cache_dir=tmp_path / "c")
    assert Path(old).read_bytes() == b"one" * 10
    assert Path(new).read_bytes() == b"two" * 10
    info = _api().repo_info("org/data", repo_type="dataset")
    assert [s.rfilename for s in info.siblings] == ["data.tar"]


def test_lfs_download_of_a_seeded_binary(hub_server: HubServer, tmp_path: Path) -> None:
    data = os.urandom(BIG)
    hub_server.put_file("org/data", "d.tar", data, repo_type="dataset")
    got = hf_hub_download("org/data", "d.tar", repo_type="dataset", cache_dir=tmp_path / "c")
    assert Path(got).read_bytes() == data


def test_wrong_token_is_refused(hub_server: HubServer) -> None:
    with pytest.raises(HfHubHTTPError):
        HfApi(endpoint=hub_server.url, token="hf_wrong").create_repo("me/x")
    assert ("model", "me/x") not in hub_server.repos


def test_injected_500_on_lfs_put_is_retried_by_the_client(
    hub_server: HubServer, tmp_path: Path
) -> None:
    api = _api()
    api.create_repo("me/run")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(BIG))
    hub_server.fail("lfs_put", "500")
    api.upload_file(path_or_fileobj=str(big), path_in_repo="w.pt", repo_id="me/run")
    assert hub_server.count("lfs_put", 500) == 1
    assert hub_server.count("lfs_put", 200) == 1
    assert hub_server.read_file("me/run", "w.pt") == big.read_bytes()


def test_dropped_commit_fails_and_commits_nothing(hub_server: HubServer) -> None:
    api = _api()
    api.create_repo("me/run")
    hub_server.fail("commit", "drop")
    with pytest.raises(Exception):  # noqa: B017 -- any network error from the client will do
        api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="me/run")
    assert hub_server.files("me/run") == []
    api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="me/run")
    assert hub_server.files("me/run") == ["x.txt"]


def test_lying_paths_info(hub_server: HubServer) -> None:
    api = _api()
    api.create_repo("me/run")
    hub_server.lie_about_sha256("x.txt")
    api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="me/run")
    (entry,) = api.get_paths_info("me/run", ["x.txt"])
    assert entry.blob_id != blob_id(b"x")
