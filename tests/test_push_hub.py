"""Pushes to a Hub model repo through the real huggingface_hub client and the local server."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.fixtures_push import MakeRun, wait_until
from tests.hubserver import HubServer

# As a rented box pushes: through Xet (tests/hubxet.py).
pytestmark = pytest.mark.usefixtures("xet_on")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_first_push_lands_whole_and_is_verified(hub_server: HubServer, make_run: MakeRun) -> None:
    run = make_run()
    run.epoch(1)
    run.epoch(2)
    pusher = run.pusher()
    pushed = pusher.push_now(final=False, timeout=60)

    assert pushed is not None
    assert pushed.epoch == 2
    files = hub_server.files("me/run1")
    for rel in ("weights/last.pt", "weights/best.pt", "weights/epoch_2.pt"):
        assert rel in files
        assert hub_server.entry("me/run1", rel).sha256 == sha256(run.run_dir / rel)
    for rel in ("status.json", "metrics.jsonl", "train.log", "train_config.yaml"):
        assert hub_server.read_file("me/run1", rel) == (run.run_dir / rel).read_bytes()
    assert hub_server.read_file("me/run1", "runspec/spec.yaml") == run.spec.text.encode()
    # The provenance that leaves the machine names how the spec came and its file, never the
    # submitting machine's folders, user or host.
    pushed_provenance = hub_server.read_file("me/run1", "runspec/provenance.json")
    shown = json.loads(pushed_provenance)
    assert shown["via"] == "runspec submit" and shown["file"] == "run1.yaml"
    assert set(shown) == {"via", "file", "sha256"}
    assert b"/home/ada" not in pushed_provenance and b"laptop" not in pushed_provenance
    assert hub_server.repo("me/run1").private
    record = run.reload()
    assert record.last_push is not None
    assert record.last_push.commit == hub_server.repo("me/run1").commits[0][0]
    assert record.push_error is None
    assert any("pushed epoch 2" in line and "verified" in line for line in run.lines)
    # One commit for the whole push, its message naming the epoch; the first card (the
    # repo's `runspec` tag) follows in a commit of its own.
    messages = [msg for _, _, msg in hub_server.repo("me/run1").commits]
    assert messages == ["runspec: epoch 2", "runspec: model card"]


def test_manifest_lists_every_file_with_its_hash(hub_server: HubServer, make_run: MakeRun) -> None:
    run = make_run()
    run.epoch(2)
    assert run.pusher().push_now(final=False, timeout=60) is not None
    manifest = json.loads(hub_server.read_file("me/run1", "runspec/manifest.json"))
    listed = {f["path"]: f for f in manifest["files"]}
    assert listed["weights/last.pt"]["sha256"] == sha256(run.run_dir / "weights/last.pt")
    assert listed["weights/last.pt"]["epoch"] == 2
    assert listed["weights/last.pt"]["size"] == (run.run_dir / "weights/last.pt").stat().st_size
    # Not listed: the manifest itself, the record beside it and the card after it.
    ours = {"runspec/manifest.json", "runspec/record.json", "README.md"}
    assert set(listed) == set(hub_server.files("me/run1")) - ours


def test_unchanged_files_are_not_sent_again(hub_server: HubServer, make_run: MakeRun) -> None:
    run = make_run()
    run.epoch(2)
    pusher = run.pusher()
    assert pusher.push_now(final=False, timeout=60) is not None
    sent = hub_server.bytes_stored()
    assert sent >= 3 * 12_000_000
    # Epoch 3: a new last.pt, the same best.pt and epoch_2.pt.
    run.epoch(3, best=False)
    pushed = pusher.push_now(final=False, timeout=60)
    assert pushed is not None and pushed.epoch == 3
    last = run.run_dir / "weights/last.pt"
    size = last.stat().st_size
    # Only last.pt's bytes (random, so incompressible), with Xet's framing of under 1%.
    assert size <= hub_server.bytes_stored() - sent < size * 1.01
    assert hub_server.entry("me/run1", "weights/last.pt").sha256 == sha256(last)
    # A push with nothing new sends no LFS bytes at all.
    before = hub_server.bytes_stored()
    pusher.push_now(final=True, timeout=60)
    assert hub_server.bytes_stored() == before


def test_final_push_carries_the_record_and_is_marked_final(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    run = make_run()
    run.epoch(1)
    pushed = run.pusher().push_now(final=True, timeout=60)
    assert pushed is not None and pushed.final
    assert "runspec/record.json" in hub_server.files("me/run1")
    assert run.reload().last_push.final  # type: ignore[union-attr]
    assert hub_server.repo("me/run1").commits[-1][2] == "runspec: epoch 1 (final)"


def test_failed_run_without_checkpoints_still_pushes_its_logs(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    run = make_run()
    (run.run_dir / "status.json").write_text('{"state": "failed"}')
    (run.run_dir / "train.log").write_text("Traceback: boom\n")
    pushed = run.pusher().push_now(final=True, timeout=60)
    assert pushed is not None and pushed.epoch is None
    assert hub_server.read_file("me/run1", "train.log") == b"Traceback: boom\n"
    assert hub_server.read_file("me/run1", "status.json") == b'{"state": "failed"}'


def test_truncated_last_pt_is_never_pushed(hub_server: HubServer, make_run: MakeRun) -> None:
    run = make_run()
    run.epoch(2)
    pusher = run.pusher()
    assert pusher.push_now(final=False, timeout=60) is not None
    good = sha256(run.run_dir / "weights/last.pt")
    # Epoch 3 is being saved when the machine dies: last.pt is cut in half on disk.
    run.epoch(3)
    last = run.run_dir / "weights/last.pt"
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])
    pushed = pusher.push_now(final=True, timeout=60)
    assert pushed is not None
    remote = hub_server.entry("me/run1", "weights/last.pt").sha256
    assert remote == good
    # And the truncated file's content is nowhere on the server.
    truncated = hashlib.sha256(last.read_bytes()).hexdigest()
    assert not hub_server.lfs_path(truncated).exists()


def test_truncated_before_any_push_leaves_the_staged_copy_of_the_last_good_one(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    run = make_run()
    run.epoch(1)
    pusher = run.pusher(min_interval=3600.0)
    pusher.notify_checkpoint()  # stages and pushes epoch 1
    good = run.run_dir / "weights/last.pt"
    good_sha = sha256(good)
    wait_until(lambda: run.reload().last_push is not None, 60, "the epoch 1 push", run)
    run.epoch(2)
    good.write_bytes(b"PK\x03\x04 torn")
    pushed = pusher.push_now(final=True, timeout=60)
    assert pushed is not None
    assert hub_server.entry("me/run1", "weights/last.pt").sha256 == good_sha


def test_a_new_run_under_a_freed_name_never_writes_over_the_earlier_runs_weights(
    hub_server: HubServer, make_run: MakeRun
) -> None:
    # `runspec rm run1` freed the name; its repo still holds its record and weights.
    earlier = {"name": "run1", "spec_sha256": "0" * 64, "started_at": "2026-01-02T03:04:05Z"}
    hub_server.put_file("me/run1", "runspec/record.json", json.dumps(earlier).encode(), "model")
    hub_server.put_file("me/run1", "weights/best.pt", b"the earlier run's weights", "model")
    # An engine's attempt ledger there names another run: it does not make this one the run
    # the target holds (runspec.push.owner_check.earlier_run).
    stray = {"run": "another", "spec_sha256": "1" * 64, "task_id": "t-9", "schema": 1}
    hub_server.put_file("me/run1", "runspec/attempts.json", json.dumps(stray).encode(), "model")
    run = make_run()
    run.record.started_at = "2026-03-04T05:06:07Z"  # the new run under the same name
    run.store.save(run.record)
    run.epoch(1)
    pusher = run.pusher()
    assert pusher.push_now(final=False, timeout=60) is None
    assert hub_server.read_file("me/run1", "weights/best.pt") == b"the earlier run's weights"
    assert pusher.last_permanent  # a refusal, not an outage to retry every minute
    said = run.reload().push_error or ""
    assert "holds an earlier run also named 'run1' (started 2026-01-02T03:04:05Z)" in said
    assert "push.hub.reuse: true" in said and "runspec submit --resume" in said
    # The run it is, resumed (its start carried over from the record there), pushes on.
    run.record.started_at = earlier["started_at"]
    run.store.save(run.record)
    assert pusher.push_now(final=False, timeout=60) is not None
    assert hub_server.read_file("me/run1", "weights/best.pt") != b"the earlier run's weights"
