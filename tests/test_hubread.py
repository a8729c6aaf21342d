"""The one reader of small Hub files others wrote (runspec.hubread): JSON read strictly, and
a resume's read of the record at its push target through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from runspec.hubread import HostileFile, strict_json
from tests.hubserver import HubServer

DEEP = b'{"name": "deep", "status": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b'{"lease_s": NaN}', "NaN is not a number JSON allows"),
        (b'{"lease_s": -Infinity}', "-Infinity is not a number JSON allows"),
        (b'{"state": "training", "state": "finished"}', "the key 'state' is there twice"),
        (DEEP, "nested over 32 levels deep"),
        (b'{"run": "\xff"}', "not UTF-8"),
        (b'{"run": ', "not strict JSON"),
    ],
)
def test_what_no_runspec_wrote_is_refused_saying_why(data: bytes, said: str) -> None:
    with pytest.raises(HostileFile) as caught:
        strict_json(data)
    assert said in str(caught.value)


def test_brackets_inside_strings_are_no_depth() -> None:
    text = b'{"reason": "' + b"[" * 1000 + b'", "n": [[1]]}'
    assert strict_json(text) == {"reason": "[" * 1000, "n": [[1]]}


def test_a_resume_refuses_a_record_nested_too_deep_in_one_line(
    hub_server: HubServer,
    hub_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runspec.push.base import PushFailed
    from runspec.push.fetch import read_pushed
    from runspec.spec.loader import load_spec_text
    from runspec.store.paths import RunPaths

    for key, value in hub_env.items():
        monkeypatch.setenv(key, value)
    # Anyone with write access to the run's repo (or a repo name typed wrong) leaves a record
    # nested past the parser's recursion: the old read raised RecursionError, a traceback.
    hub_server.put_file("me/deep", "runspec/record.json", DEEP, repo_type="model")
    text = (
        "runspec: 1\nname: deep\ndataset: {synthetic: {train: 4, val: 2}}\n"
        "train: {model: yolo9-t, epochs: 1}\nbudget: {wall_clock: 1h}\n"
        "push: {hub: {repo: me/deep}}\n"
    )
    spec = load_spec_text(text, "deep.yaml")
    with pytest.raises(PushFailed) as caught:
        read_pushed(spec, RunPaths.decide(spec, tmp_path / "state"))
    assert "holds a damaged runspec record: " in str(caught.value)
    assert "nested over 32 levels deep" in str(caught.value)


GCP = "projects/my-proj-123/zones/europe-west4-a/instances/train-box-1"


@pytest.mark.parametrize(
    ("provider", "instance", "ok"),
    [
        ("gcp", GCP, True),  # how runspec.providers.gcp names an instance
        ("gcp", "projects/p/zones/z/instances/../../x", False),
        ("gcp", GCP + "/stop", False),
        ("vast", GCP, False),  # a path is no vast instance
        ("vast", "4242", True),
        ("aws", "i-0abc123def4567890", True),
        ("runpod", "abc/../../pods", False),
    ],
)
def test_an_instance_id_is_what_its_provider_names(provider: str, instance: str, ok: bool) -> None:
    import time

    from runspec.clock import utc_iso
    from runspec.watch.leasefields import DamagedLease, read_fields

    now = utc_iso(time.time())
    doc = {
        "schema": 1,
        "run": "r",
        "vouched_until": now,
        "state": "training",
        "epoch": 1,
        "renewed_at": now,
        "lease_s": 300,
        "final_verified": False,
        "provider": provider,
        "instance": instance,
    }
    if ok:
        assert read_fields(doc)["instance"] == instance
    else:
        with pytest.raises(DamagedLease, match="instance"):
            read_fields(doc)
