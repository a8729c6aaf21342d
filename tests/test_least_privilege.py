"""Least privilege outside systemd (a container, `runspec run`): the trainer and the preflight
get no provider key, the Hub token only when they need it, and what the run writes (its run
folder, its weights, its pushed copies) is its owner's alone."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pytest

from runspec.preflight import child_env
from runspec.providers import PROVIDERS
from runspec.spec.loader import load_spec_text
from runspec.store.paths import RunPaths
from runspec.trainer import trainerunit
from runspec.trainer.control import TrainJob
from runspec.trainer.trainerunit import trainer_env
from tests.fixtures_run import SpecWriter, finish_run, start_run

KEYS = {
    "CONTAINER_API_KEY": "vast-key-0123456789",
    "RUNPOD_API_KEY": "runpod-key-0123456789",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-0123456789",
    "HCLOUD_TOKEN": "hetzner-token-0123456789",
    "HF_TOKEN": "hf_leastprivilege0123456789",
}


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(): v.decode(errors="replace") for k, v in pairs}


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*")}


@pytest.mark.training
def test_a_session_trainer_has_no_secret_and_writes_for_its_owner_only(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    project, volume = tmp_path / "project", tmp_path / "volume"
    spec = write_spec("lp", epochs=3, output={"project": str(project)}, push={"dir": str(volume)})
    state = tmp_path / "state"
    proc = start_run(spec, state, {**KEYS, "RUNSPEC_TEST_MARK": "kept"})
    trainer = state / "jobs" / "lp" / "trainer.json"
    end = time.monotonic() + 120
    while not trainer.exists() and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.05)
    pid = json.loads(trainer.read_text())["identity"]["pid"]
    env = _environ(pid)
    code, out = finish_run(proc)
    assert code == 0, out
    # The launcher's own environment reaches the trainer; no secret does (yolo9-t needs none).
    assert env.get("RUNSPEC_TEST_MARK") == "kept"
    assert [name for name in KEYS if name in env] == []
    assert not any(value in "\0".join(env.values()) for value in KEYS.values())
    # The run folder and the pushed copies: 0700 folders, 0600 files (the umask 0077).
    for root in (project / "lp", volume / "lp"):
        modes = _modes(root)
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
        assert "weights/last.pt" in modes, sorted(modes)
        loose = {path: oct(mode) for path, mode in modes.items() if mode & 0o077}
        assert loose == {}, root


def test_the_preflight_gets_the_token_only_for_the_hub_and_never_a_provider_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    base = "runspec: 1\nname: pf\ntrain: {model: MODEL, epochs: 1, device: cpu}\n"
    base += "budget: {wall_clock: 10m}\n"
    synthetic = base + "dataset: {synthetic: {}}\n"
    hub_data = base + "dataset: {hub: {repo: org/d, file: d.tar}, data: d/data.yaml}\n"
    hub_push = synthetic + "push: {hub: {repo: me/out}}\n"
    cases = [
        (synthetic, "yolo9-t", False),
        (hub_data, "yolo9-t", True),
        (hub_push, "yolo9-t", True),
        # Its profiler builds the model the trainer will: from a Hub repo, with the token.
        (synthetic, "someorg/private-detector", True),
    ]
    for text, model, wants_token in cases:
        env = child_env(load_spec_text(text.replace("MODEL", model), "pf.yaml"))
        assert ("HF_TOKEN" in env) is wants_token, (model, text)
        assert [k for k in KEYS if k != "HF_TOKEN" and k in env] == []


def test_no_child_gets_any_providers_key_a_new_adapter_included(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deny list is every registered adapter's `secret_env`: a new adapter's key (here one
    whose name does not even look like a secret) is withheld without touching the list."""

    class Acme(PROVIDERS["vast"]):  # type: ignore[misc, valid-type]
        name = "acme"
        secret_env = ("ACME_CREDS_BLOB",)

    monkeypatch.setitem(PROVIDERS, "acme", Acme)
    monkeypatch.setenv("ACME_CREDS_BLOB", "acme-0123456789")
    for cls in PROVIDERS.values():
        for name in cls.secret_env:
            monkeypatch.setenv(name, f"{name.lower()}-0123456789")
    spec = load_spec_text(
        "runspec: 1\nname: nk\ndataset: {synthetic: {}}\n"
        "train: {model: yolo9-t, epochs: 1, device: cpu}\nbudget: {wall_clock: 10m}\n",
        "nk.yaml",
    )
    env = child_env(spec)
    named = {name for cls in PROVIDERS.values() for name in cls.secret_env}
    assert "ACME_CREDS_BLOB" in named
    assert sorted(named & set(env)) == []
    state = Path("/nonexistent/state")
    job = TrainJob.from_spec(spec, RunPaths.for_spec(spec, state), state / "data.yaml")
    # Both of the trainer's routes (its unit, its own session) build its environment here.
    for with_token in (False, True):
        assert sorted(named & set(trainer_env(job, with_token=with_token))) == []


@pytest.mark.parametrize("state_root", ["/tmp/state-by-mktemp", "/var/lib/runspec"])
def test_the_trainer_units_sandbox_leaves_it_a_writable_tmp(
    state_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ProtectSystem=strict makes /tmp read-only unless the unit has a private one, and torch
    cannot even be imported without a writable /tmp (its inductor cache). With the run's own
    folders in the shared /tmp (a mktemp'd state folder) the shared one is made writable; else
    the trainer gets a private one."""
    monkeypatch.setattr(trainerunit.os, "geteuid", lambda: 0)
    monkeypatch.setenv("HF_HOME", "/root/.cache/huggingface")  # not a test's tmp folder
    state = Path(state_root)
    paths = RunPaths(state=state, name="t", project=state / "runs", data_root=state / "data")
    spec = load_spec_text(
        "runspec: 1\nname: t\ndataset: {path: /srv/data.yaml}\n"
        "train: {model: yolo9-t, epochs: 1, device: cpu}\nbudget: {wall_clock: 1h}\n",
        "t.yaml",
    )
    job = TrainJob.from_spec(spec, paths, state / "data/data.yaml")
    props = dict(
        p.split("=", 1) for p in trainerunit.sandbox_properties(job, paths, needs_token=False)
    )
    writable = props["ReadWritePaths"].split()
    assert props["ProtectSystem"] == "strict"
    if state_root.startswith("/tmp"):
        assert '"-/tmp"' in writable and '"-/var/tmp"' in writable
        assert "PrivateTmp" not in props
    else:
        assert props["PrivateTmp"] == "yes"
        assert not any(w.startswith('"-/tmp') for w in writable)
