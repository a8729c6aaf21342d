"""Pushes through the Hub's Xet path, as a rented box makes them (issue 37): hf_xet on, the
local Hub handing out xet-core's own content store (tests/hubxet.py).

With Xet, the Hub's record of a file's sha256 is what the client declared: hf_xet takes a
given sha256 as `Sha256Policy::Provided` and never hashes the bytes against it. So "verified"
must mean that bytes were read: a push whose declared hash is not its bytes', or whose bytes
the Hub does not serve back, is not verified.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi, hf_hub_download

from runspec.push.base import PushFailed, StagedFile
from runspec.push.fetch import Source, read_pushed
from runspec.push.hub import HubTarget
from runspec.push.manifest import ManifestEntry, digest_file
from runspec.store.state import RunStatus
from tests.fixtures_push import MakeRun
from tests.hubserver import HubServer

SIZE = 11 * 1000 * 1000  # over the Hub's 10 MB: an LFS file, so a Xet one


def _weights(path: Path, size: int = SIZE) -> bytes:
    data = os.urandom(size)
    path.write_bytes(data)
    return data


def test_the_standin_records_a_declared_sha256_as_given(xet_on: HubServer, tmp_path: Path) -> None:
    """The stand-in reproduces the real Hub's answer: the upload goes through the Xet token
    route and xet-core's store, the declared sha256 is recorded as given, and the bytes that
    come back are the ones uploaded."""
    local = tmp_path / "last.pt"
    data = _weights(local)
    declared = hashlib.sha256(b"not these bytes").hexdigest()
    api = HfApi()
    api.create_repo("me/lie", private=True)
    op = CommitOperationAdd(path_in_repo="weights/last.pt", path_or_fileobj=str(local))
    op.upload_info.sha256 = bytes.fromhex(declared)
    info = api.create_commit("me/lie", operations=[op], commit_message="declared")

    assert ("write", "me/lie", "main") in (xet_on.xet.tokens if xet_on.xet else [])
    assert xet_on.count("lfs_batch") == 0, "the client took the LFS path, not Xet's"
    (remote,) = api.get_paths_info("me/lie", ["weights/last.pt"], revision=info.oid)
    assert remote.lfs is not None and remote.lfs.sha256 == declared  # the lie, as on the Hub
    assert remote.xet_hash is not None
    # Downloads come from the store: through hf_xet (the read token) and through the bridge.
    got = hf_hub_download("me/lie", "weights/last.pt", revision=info.oid)
    assert Path(got).read_bytes() == data
    assert xet_on.read_file("me/lie", "weights/last.pt") == data


def test_a_declared_hash_that_is_not_the_bytes_is_caught(xet_on: HubServer, tmp_path: Path) -> None:
    """The staged copy's bytes changed after runspec hashed it (a bad disk): the Hub records
    whatever was declared, so only reading bytes can tell."""
    local = tmp_path / "last.pt"
    _weights(local)
    real = digest_file(local)
    claimed = hashlib.sha256(b"the bytes runspec hashed before the disk flipped one").hexdigest()
    entry = ManifestEntry("weights/last.pt", real.size, claimed, epoch=2, time="")
    target = HubTarget("me/run1")
    commit = target.push([StagedFile(entry, local)], "runspec: epoch 2")
    problems = target.verify(commit, [entry], [StagedFile(entry, local)])
    assert problems, "a push whose bytes are not the declared hash was called verified"
    assert problems[0].startswith("weights/last.pt: ")


def test_a_rotten_copy_fails_every_push_not_only_the_final_one(
    xet_on: HubServer, make_run: MakeRun
) -> None:
    """A push that is not final, with `verify: metadata`, is a push the lease and the record
    name as the newest verified checkpoint: the Hub must serve its bytes back."""
    run = make_run(verify="metadata")
    for status in (RunStatus.PREFLIGHT, RunStatus.STAGING, RunStatus.TRAINING):
        run.store.transition(run.record, status, "test")
    run.epoch(2)
    pusher = run.pusher()
    xet_on.corrupt = True
    assert pusher.push_now(final=False, timeout=60) is None
    record = run.reload()
    assert record.last_push is None, "a push whose bytes do not come back was called verified"
    assert record.push_error is not None and "the Hub serves" in record.push_error

    xet_on.corrupt = False  # the retry finds the bytes good
    pushed = pusher.push_now(final=False, timeout=60)
    assert pushed is not None and pushed.epoch == 2
    assert xet_on.count("xet_bridge") > 0 and xet_on.count("lfs_batch") == 0


def test_a_fresh_disk_reads_a_xet_checkpoint_back_whole(
    xet_on: HubServer, make_run: MakeRun, tmp_path: Path
) -> None:
    """A resume on a new machine reads the record and the manifest, then downloads the newest
    checkpoint through the Hub's redirect to the Xet bridge (another host, no Hub token sent)
    and keeps it only once its bytes are the manifest's."""
    run = make_run()
    run.epoch(2)
    assert run.pusher().push_now(final=False, timeout=60) is not None
    pushed = read_pushed(run.spec, run.paths)
    assert pushed.manifest is not None and pushed.commit is not None
    entry = pushed.manifest.by_path()["weights/last.pt"]
    dest = tmp_path / "fresh" / "last.pt"
    Source(hub="me/run1", commit=pushed.commit).download(entry, dest)
    assert dest.read_bytes() == (run.run_dir / "weights/last.pt").read_bytes()
    assert xet_on.xet is not None and xet_on.xet.bridge_auth
    assert not any(xet_on.xet.bridge_auth), "the Hub token was sent to the bridge's host"

    xet_on.corrupt = True  # the bridge serves other bytes: nothing is kept
    with pytest.raises(PushFailed, match="is not the verified checkpoint"):
        Source(hub="me/run1", commit=pushed.commit).download(entry, tmp_path / "bad" / "last.pt")
    assert not (tmp_path / "bad" / "last.pt").exists()
