"""One resume rule for people and engines (issue 35): a push target that lost
`runspec/record.json` but still holds this run's manifest and verified weights never yields a
fresh start. An engine's retry resumes from the newest verified checkpoint, with the spent
budget kept and its unknown start said; weights nothing vouches for are refused (exit 2).
Real `runspec run`s, a tiny real training, a push folder as the target."""

from __future__ import annotations

import hashlib
import json
import signal
import time
from pathlib import Path

import pytest

from runspec.clock import parse_utc_iso
from runspec.push.manifest import Manifest
from tests.fixtures_daemon import end_leftovers
from tests.fixtures_run import SpecWriter, finish_run, record_of, start_run, wait_record

WALL = 30 * 60  # the base spec's wall_clock
ENGINE = {"SKYPILOT_TASK_ID": "sky-2026-12-03-lost"}


@pytest.mark.training
def test_an_engine_retry_on_a_target_without_its_record_resumes_with_the_budget_kept(
    write_spec: SpecWriter, tmp_path: Path
) -> None:
    target = tmp_path / "pushed"
    spec = write_spec(
        "lost", epochs=3, push={"dir": str(target), "every": "1h"},
        train={"save_period": 1}, finish={"action": "none"},
    )  # fmt: skip
    first, second = tmp_path / "machine1", tmp_path / "machine2"
    proc = start_run(spec, first, ENGINE)
    try:
        wait_record(first, "lost", lambda r: r.get("epoch", 0) >= 1, 300)
        proc.send_signal(signal.SIGTERM)  # the engine's preemption: push, then exit
        finish_run(proc, timeout=300)
        first_ended = time.time()  # its record has no ended_at where the grace ran out first
        one = record_of(first, "lost")
        pushed = Manifest.load(target / "lost" / "runspec" / "manifest.json")
        assert pushed is not None and pushed.epoch, one
        verified_epoch = pushed.epoch
        (target / "lost" / "runspec" / "record.json").unlink()  # the record is lost
        proc = start_run(spec, second, ENGINE)  # the engine's retry, on a fresh machine
        code, out = finish_run(proc, timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        end_leftovers(first)
        end_leftovers(second)
    assert code == 0, out[-4000:]
    assert "runspec/record.json is gone from dir" in out, out[:4000]
    assert "the budget's start is unknown" in out, out[:4000]
    assert "resuming from" in out and "the budget left is" in out, out[:4000]
    # It went on after the verified epoch, never from epoch 1 again.
    assert f"epoch {verified_epoch}/3" not in out and "epoch 1/3" not in out, out[-4000:]
    two = record_of(second, "lost")
    assert two["termination"] == "completed" and two["epoch"] == 3, two
    # The spent budget is kept: counted from the first attempt's first verified push at the
    # latest, never a fresh budget from this attempt's start.
    first_push = min(parse_utc_iso(e.time) for e in pushed.entries)
    assert parse_utc_iso(two["deadline"]) <= first_push + WALL + 1, (two["deadline"], first_push)
    ended = parse_utc_iso(one["ended_at"]) if one.get("ended_at") else first_ended
    assert parse_utc_iso(two["deadline"]) < ended + WALL, (two["deadline"], one)
    final = Manifest.load(target / "lost" / "runspec" / "manifest.json")
    assert final is not None and final.epoch == 3 and final.final


def _planted(target: Path, name: str, spec_text: bytes) -> None:
    """A target that holds a run's manifest and weights (epoch 2) and no record."""
    folder = target / name / "runspec"
    folder.mkdir(parents=True)
    files = [
        {"path": "runspec/spec.yaml", "size": len(spec_text), "epoch": None,
         "sha256": hashlib.sha256(spec_text).hexdigest(), "time": "2026-12-03T10:00:00+00:00"},
        {"path": "weights/last.pt", "size": 4, "epoch": 2, "sha256": "ab" * 32,
         "time": "2026-12-03T10:05:00+00:00"},
    ]  # fmt: skip
    manifest = {"run": name, "epoch": 2, "time": "2026-12-03T10:05:00+00:00", "final": True}
    (folder / "manifest.json").write_text(json.dumps({**manifest, "files": files}))


@pytest.mark.parametrize("how", ["engine", "by hand"])
def test_weights_without_a_record_that_nothing_vouches_for_are_refused(
    write_spec: SpecWriter, tmp_path: Path, how: str
) -> None:
    """Weights of a run of this name, beside another spec's copy: refused by both paths, and
    nothing pushed over them."""
    target = tmp_path / "pushed"
    _planted(target, "mine", b"runspec: 1\nname: mine\n# another spec\n")
    before = (target / "mine" / "runspec" / "manifest.json").read_bytes()
    spec = write_spec("mine", push={"dir": str(target)})
    extra = ("--resume",) if how == "by hand" else ()
    proc = start_run(spec, tmp_path / "state", ENGINE if how == "engine" else None, *extra)
    code, out = finish_run(proc, timeout=120)
    assert code == 2, out
    assert "holds weights of a run named 'mine' but no runspec record" in out, out
    assert (target / "mine" / "runspec" / "manifest.json").read_bytes() == before
    assert not (tmp_path / "state" / "jobs" / "mine" / "record.json").exists()
