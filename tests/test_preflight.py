"""The preflight on this machine (torch without a GPU): the real child, real checks, no fakes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from runspec.checkresult import CheckStatus
from runspec.dataset.staging import stage_dataset
from runspec.preflight import run_preflight
from runspec.preflight.checks import dataset_bytes, push_check
from runspec.preflight.disk import (
    checkpoint_count,
    disk_check,
    hf_home_check,
    model_params_m,
)
from runspec.spec.loader import load_spec
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths
from tests.fixtures_disk import SmallFs
from tests.hubserver import HubServer

REPO = Path(__file__).resolve().parent.parent


def _spec(tmp_path: Path, body: str, name: str = "pf") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"runspec: 1\nname: {name}\ndataset:\n  synthetic: {{}}\n"
        f"budget:\n  wall_clock: 10m\n{body}",
        encoding="utf-8",
    )
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runspec", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )


def _by_name(report: dict[str, object]) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in report["checks"]}  # type: ignore[attr-defined,index]


def test_cpu_spec_passes_with_every_machine_check_reported(tmp_path: Path) -> None:
    spec = _spec(
        tmp_path,
        "train:\n  model: yolo9-t\n  epochs: 3\n  device: cpu\n  args: {pretrained: false}\n",
    )
    proc = _cli("preflight", str(spec), "--state", str(tmp_path / "state"), "--format", "json")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    report = json.loads(proc.stdout)
    checks = _by_name(report)
    assert report["failed"] is False
    every = ("python", "torch", "torchvision", "libreyolo", "gpu", "disk", "hf_home", "push")
    for name in (*every, "weights", "finish"):
        assert checks[name]["status"] in ("pass", "warn"), checks[name]
    assert "skipped" in checks["gpu"]["message"]
    assert "torch 2." in checks["torch"]["message"]
    # The dataset is not staged yet, so the doctor says so instead of failing the run.
    assert checks["doctor"]["status"] == "warn"


def test_device_0_without_a_gpu_fails_saying_the_gpu_is_missing(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, "train:\n  model: yolo9-t\n  epochs: 3\n  device: 0\n"))
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    report = run_preflight(spec, paths, "machine", timeout=120)
    assert report.failed
    gpu = next(c for c in report.failures if c.name == "gpu")
    assert "train.device: 0 needs a GPU" in gpu.message
    assert "no CUDA GPU" in gpu.message
    assert "train.device: cpu" in gpu.fix
    assert "gpu: train.device: 0 needs a GPU" in report.reason()
    # The text form a user reads, through the command, with its exit status.
    proc = _cli("preflight", str(tmp_path / "pf.yaml"), "--state", str(tmp_path / "state"))
    assert proc.returncode == 1
    assert "FAIL  gpu: train.device: 0 needs a GPU" in proc.stdout
    assert "fix: " in proc.stdout
    # Asking for the collective on one GPU reaches the child, which still reports the GPU.
    proc = _cli(
        "preflight", str(tmp_path / "pf.yaml"), "--state", str(tmp_path / "state"),
        "--collective-one-gpu",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "FAIL  gpu: train.device: 0 needs a GPU" in proc.stdout


def test_an_invalid_spec_is_a_usage_error(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "train:\n  model: yolo9-t\n  epochs: -3\n")
    proc = _cli("preflight", str(spec), "--state", str(tmp_path / "state"))
    assert proc.returncode == 2
    assert "/train/epochs" in proc.stderr


def test_a_preflight_past_its_hard_timeout_is_killed_and_fails(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, "train:\n  model: yolo9-t\n  epochs: 3\n  device: cpu\n"))
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    report = run_preflight(spec, paths, "all", timeout=0.3)
    assert report.failed
    assert [c.name for c in report.checks] == ["preflight"]
    assert "did not finish within" in report.checks[0].message


def _loaded(tmp_path: Path, body: str) -> Spec:
    return load_spec(_spec(tmp_path, body))


def test_disk_fails_when_the_checkpoints_need_more_than_is_free(tmp_path: Path) -> None:
    # 100000 epochs with a checkpoint each: 100002 x 35 MB, far beyond any disk here.
    spec = _loaded(
        tmp_path, "train:\n  model: yolo9-t\n  epochs: 100000\n  save_period: 1\n  device: cpu\n"
    )
    result = disk_check(spec, tmp_path / "runs" / "pf", tmp_path / "data", 0)
    assert result.status is CheckStatus.FAIL
    assert "100002 checkpoints x 35.0 MB" in result.message
    assert "free" in result.message
    # The fix names the knobs that shrink the need, not only "buy a bigger disk".
    assert result.fix is not None
    assert "train.save_period (it keeps 100000 epoch_N.pt files)" in result.fix
    assert "preflight.disk" in result.fix


def test_disk_counts_the_staged_copies_a_push_makes(tmp_path: Path, small_fs: SmallFs) -> None:
    # 3 epochs, a checkpoint each: last, best and 3 epoch_N.pt = 5 x 35 MB (+30%) = 227 MB.
    body = "train: {model: yolo9-t, epochs: 3, save_period: 1, device: cpu}\n"
    fs = small_fs(300)
    local = disk_check(_loaded(tmp_path, body), fs / "runs", fs / "data", 0, fs / "staged")
    assert local.status is CheckStatus.PASS, local.message  # no push: nothing is staged
    pushed = _loaded(tmp_path, body + "push: {dir: /mnt/volume}\n")
    result = disk_check(pushed, fs / "runs", fs / "data", 0, fs / "staged")
    # The staged copies need as much again: 455 MB on a 300 MB disk.
    assert result.status is CheckStatus.FAIL, result.message
    assert "their 5 staged copies for the push" in result.message


def test_disk_uses_the_size_the_spec_gives(tmp_path: Path) -> None:
    small = _loaded(tmp_path, "train: {model: yolo9-t, epochs: 3}\npreflight: {disk: 1MB}\n")
    assert disk_check(small, tmp_path / "runs", tmp_path / "data", 0).status is CheckStatus.PASS
    huge = _loaded(tmp_path, "train: {model: yolo9-t, epochs: 3}\npreflight: {disk: 900TB}\n")
    result = disk_check(huge, tmp_path / "runs", tmp_path / "data", 0)
    assert result.status is CheckStatus.FAIL and "preflight.disk" in result.message


def test_disk_counts_the_dataset_on_its_own_filesystem(tmp_path: Path) -> None:
    spec = _loaded(tmp_path, "train: {model: yolo9-t, epochs: 3}\n")
    result = disk_check(spec, tmp_path / "runs", tmp_path / "data", 10**15)
    assert result.status is CheckStatus.FAIL and "dataset 1000.0 TB" in result.message


def test_checkpoint_estimates_follow_the_model_and_the_save_period() -> None:
    assert model_params_m("yolo9-t") == (2.04, True)
    assert model_params_m("LibreYOLO9s.pt") == (7.2, True)
    assert model_params_m("/weights/LibreYOLOXn.pt") == (0.91, True)
    assert model_params_m("yolox-l")[0] > model_params_m("yolox-s")[0]
    assert model_params_m("my-custom-net.pt")[1] is False
    assert checkpoint_count(100, 10) == 12  # last, best, epoch_10 ... epoch_100


def _paths(tmp_path: Path, spec: Spec) -> RunPaths:
    return RunPaths.for_spec(spec, tmp_path / "state")


def test_push_dir_is_written_and_cleaned_or_refused(tmp_path: Path) -> None:
    volume = tmp_path / "volume"
    spec = _loaded(tmp_path, f"train: {{model: yolo9-t, epochs: 3}}\npush: {{dir: {volume}}}\n")
    result = push_check(spec, _paths(tmp_path, spec))
    assert result.status is CheckStatus.PASS
    assert list((volume / "pf").iterdir()) == []  # the probe file is gone
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the volume should be")
    bad = _loaded(tmp_path, f"train: {{model: yolo9-t, epochs: 3}}\npush: {{dir: {blocker}}}\n")
    refused = push_check(bad, _paths(tmp_path, bad))
    assert refused.status is CheckStatus.FAIL and str(blocker) in refused.message


def test_a_destroy_with_the_push_folder_on_the_machines_own_disk_is_refused(
    tmp_path: Path, small_fs: SmallFs
) -> None:
    body = "train: {{model: yolo9-t, epochs: 3}}\npush: {{dir: {}}}\nfinish: {{action: {}}}\n"
    local = _loaded(tmp_path, body.format(tmp_path / "volume", "destroy"))
    refused = push_check(local, _paths(tmp_path, local))
    assert refused.status is CheckStatus.FAIL, refused
    assert "on the same disk as /" in refused.message and "destroy would delete" in refused.message
    assert "push.hub" in refused.fix and "finish.action: stop" in refused.fix
    # stop keeps the disk: allowed; a volume that outlives the machine: allowed.
    stop = _loaded(tmp_path, body.format(tmp_path / "volume", "stop"))
    assert push_check(stop, _paths(tmp_path, stop)).status is CheckStatus.PASS
    volume = small_fs(10)
    mounted = _loaded(tmp_path, body.format(volume, "destroy"))
    assert push_check(mounted, _paths(tmp_path, mounted)).status is CheckStatus.PASS


def test_push_hub_asks_and_creates_nothing(tmp_path: Path, hub_server: HubServer) -> None:
    hub_server.whoami = {
        "name": "me",
        "orgs": [{"name": "org"}],
        "auth": {"accessToken": {"role": "write"}},
    }
    spec = _loaded(
        tmp_path, "train: {model: yolo9-t, epochs: 3}\npush: {hub: {repo: org/pf-run}}\n"
    )
    result = push_check(spec, _paths(tmp_path, spec))
    assert result.status is CheckStatus.PASS, result
    assert "me's token may write to model repo org/pf-run" in result.message
    assert "created (private) with the run's first lease" in result.message
    assert ("model", "org/pf-run") not in hub_server.repos  # a typo leaves no stray repo
    assert hub_server.count("create_repo") == 0


def test_push_hub_refuses_a_read_token_and_another_namespace(
    tmp_path: Path, hub_server: HubServer
) -> None:
    hub_server.whoami = {"name": "me", "orgs": [], "auth": {"accessToken": {"role": "write"}}}
    spec = _loaded(
        tmp_path, "train: {model: yolo9-t, epochs: 3}\npush: {hub: {repo: else/pf-run}}\n"
    )
    result = push_check(spec, _paths(tmp_path, spec))
    assert result.status is CheckStatus.FAIL
    assert "'me' is not 'else' nor one of its orgs" in result.message
    hub_server.whoami = {"name": "else", "auth": {"accessToken": {"role": "read"}}}
    result = push_check(spec, _paths(tmp_path, spec))
    assert result.status is CheckStatus.FAIL and "read-only" in result.message


def test_push_hub_with_a_rejected_token_fails(
    tmp_path: Path, hub_server: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_not_the_right_one")
    spec = _loaded(
        tmp_path, "train: {model: yolo9-t, epochs: 3}\npush: {hub: {repo: org/pf-run}}\n"
    )
    result = push_check(spec, _paths(tmp_path, spec))
    assert result.status is CheckStatus.FAIL
    assert "rejected the token" in result.message and "HF_TOKEN" in result.fix


# A container as providers run them: the image on overlay, a volume mounted at /workspace.
CONTAINER_MOUNTINFO = """\
611 540 0:52 / / rw,relatime master:292 - overlay overlay rw,lowerdir=/l1,upperdir=/u,workdir=/w
612 611 0:55 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
613 611 0:56 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
620 611 259:3 /volumes/ws /workspace rw,relatime - ext4 /dev/nvme0n1p3 rw
621 611 259:1 /etc/hosts /etc/hosts rw,relatime - ext4 /dev/nvme0n1p1 rw
"""


def test_hf_home_on_the_container_layer_warns_and_names_the_volume() -> None:
    throwaway = hf_home_check(Path("/root/.cache/huggingface"), CONTAINER_MOUNTINFO)
    assert throwaway.status is CheckStatus.WARN
    assert "overlay" in throwaway.message and "/workspace" in throwaway.fix
    kept = hf_home_check(Path("/workspace/hf"), CONTAINER_MOUNTINFO)
    assert kept.status is CheckStatus.PASS and "ext4 at /workspace" in kept.message


def test_hf_home_check_reads_this_machines_mounts(tmp_path: Path) -> None:
    result = hf_home_check(tmp_path, Path("/proc/self/mountinfo").read_text())
    assert result.status in (CheckStatus.PASS, CheckStatus.WARN)
    assert str(tmp_path) in result.message


def test_the_disk_check_counts_a_hub_dataset_until_it_is_extracted(
    tmp_path: Path, hub_server: object
) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("ds/data.yaml")
        info.size = 11
        tar.addfile(info, io.BytesIO(b"names: [a]\n"))
    payload = buf.getvalue()
    hub_server.put_file("org/ds", "ds.tar", payload, repo_type="dataset")  # type: ignore[attr-defined]
    hub_spec_path = tmp_path / "hub.yaml"
    hub_spec_path.write_text(
        "runspec: 1\nname: hubds\ndataset:\n  hub: {repo: org/ds, file: ds.tar}\n"
        "  data: ds/data.yaml\ntrain: {model: yolo9-t, epochs: 3}\nbudget: {wall_clock: 10m}\n"
    )
    spec = load_spec(hub_spec_path)
    paths = RunPaths.for_spec(spec, tmp_path / "state")
    need, note = dataset_bytes(spec, paths.data_root)
    assert need == 2 * len(payload)  # the tar in the Hub cache, and its contents beside it
    assert note is not None and note.status is CheckStatus.PASS
    stage_dataset(spec, paths, progress=lambda _: None)
    assert dataset_bytes(spec, paths.data_root) == (0, None)
