"""The finish gate and actions, and the failsafe's decisions and command lines.

Provider calls go to the local stand-in (fixtures_providers.py); the poweroff commands are
harmless scripts that leave a marker file; container detection reads a test root. Nothing here
can power off or destroy the machine running the tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil
import pytest

from runspec.clock import ManualClock, utc_iso
from runspec.machine import failsafe
from runspec.machine.armedspec import armed_sha256
from runspec.machine.finish import FinishContext, FinishResult, apply_finish
from runspec.machine.host import FinishHost, container_reason
from runspec.providers.vast import Vast
from runspec.run.accept import accept
from runspec.spec.loader import load_spec_text
from runspec.spec.model import Spec
from runspec.store.paths import RunPaths
from runspec.store.state import RecordStore, RunRecord, RunStatus
from tests.fixtures_providers import Answer, StandIn, vast_answers_stopped
from tests.fixtures_push import write_checkpoint

VAST_KEY = "vast-key-finish-test"


def make_spec(finish: str, name: str = "fin") -> Spec:
    text = f"""\
runspec: 1
name: {name}
dataset: {{synthetic: {{}}}}
train: {{model: yolo9-t, epochs: 3, device: cpu}}
push: {{dir: /tmp/runspec-test-pushed}}
budget: {{wall_clock: 10m, overrun: 5m, hourly_cost: 3.4828}}
finish: {finish}
"""
    return load_spec_text(text, f"{name}.yaml")


def context(spec: Spec) -> FinishContext:
    return FinishContext(spec.name, spec.budget.hourly_cost, "/state/runs/fin")


def wait_for(predicate: Callable[[], object], timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, f"timed out waiting for {predicate}"
        time.sleep(0.05)


class Output:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def host_root(tmp_path: Path) -> Path:
    """A root that does not look like a container."""
    root = tmp_path / "root"
    (root / "proc/1").mkdir(parents=True)
    (root / "proc/1/cgroup").write_text("0::/init.scope\n")
    (root / "proc/1/environ").write_bytes(b"HOME=/\0")
    return root


@pytest.fixture
def poweroff_script(tmp_path: Path) -> Path:
    script = tmp_path / "fake-poweroff"
    script.write_text('#!/bin/sh\ntouch "$0.ran"\n')
    script.chmod(0o755)
    return script


def host(root: Path, env: dict[str, str], script: Path | None = None, **kw: object) -> FinishHost:
    return FinishHost(
        root=root,
        detect_virt=("/nonexistent/systemd-detect-virt",),
        poweroff_commands=((str(script),),) if script else (),
        env=env,
        **kw,  # type: ignore[arg-type]
    )


def vast_env(provider_env: dict[str, str]) -> dict[str, str]:
    return {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": VAST_KEY}


def finish(
    spec: Spec,
    *,
    verified: bool,
    finish_host: FinishHost,
    dry_run: bool = False,
) -> tuple[FinishResult, Output]:
    out = Output()
    result = apply_finish(
        spec.finish,
        context(spec),
        verified=verified,
        dry_run=dry_run,
        clock=ManualClock(),
        log=out,
        host=finish_host,
    )
    return result, out


# command


def test_a_command_finish_runs_after_saying_what_it_will_run(
    tmp_path: Path, host_root: Path
) -> None:
    marker = tmp_path / "finished"
    spec = make_spec(f"{{action: command, command: [touch, {marker}]}}")
    existed_when_announced: list[bool] = []
    out = Output()

    def log(line: str) -> None:
        if line.startswith("finish: about to"):
            existed_when_announced.append(marker.exists())
        out(line)

    result = apply_finish(
        spec.finish,
        context(spec),
        verified=True,
        dry_run=False,
        clock=ManualClock(),
        log=log,
        host=host(host_root, {}),
    )
    assert marker.exists()
    assert existed_when_announced == [False]  # announced first, then done
    assert result.ok and result.action == "command" and result.summary == "command exited 0"
    assert f"run ['touch', '{marker}']" in out.text


def test_a_failing_missing_or_hanging_command_is_reported(host_root: Path) -> None:
    failed, out = finish(
        make_spec("{action: command, command: [sh, -c, 'echo oops >&2; exit 3']}"),
        verified=True,
        finish_host=host(host_root, {}),
    )
    assert not failed.ok and failed.summary == "command exited 3"
    assert "finish: command stderr: oops" in out.text

    missing, _ = finish(
        make_spec("{action: command, command: [no-such-program-runspec]}"),
        verified=True,
        finish_host=host(host_root, {}),
    )
    assert not missing.ok and "not on PATH" in missing.detail

    slow, _ = finish(
        make_spec("{action: command, command: [sleep, '5']}"),
        verified=True,
        finish_host=host(host_root, {}, command_timeout=0.3),
    )
    assert not slow.ok and "timed out" in slow.summary


def test_dry_run_only_prints(
    tmp_path: Path, host_root: Path, standin: StandIn, provider_env: dict[str, str]
) -> None:
    marker = tmp_path / "finished"
    cmd, out = finish(
        make_spec(f"{{action: command, command: [touch, {marker}]}}"),
        verified=True,
        dry_run=True,
        finish_host=host(host_root, {}),
    )
    assert cmd.ok and cmd.dry_run and not marker.exists()
    assert out.lines[-1].startswith("finish (dry run, nothing done): would run")

    vast_answers_stopped(standin)
    destroy, out = finish(
        make_spec("{action: destroy, provider: vast}"),
        verified=True,
        dry_run=True,
        finish_host=host(host_root, vast_env(provider_env)),
    )
    assert destroy.ok and destroy.action == "destroy"
    assert standin.requests == []  # not even a state poll
    assert "would vast: destroy instance 4242 (CONTAINER_ID): DELETE " in out.text


# destroy, stop, auto


def test_verified_destroy_goes_through_the_provider(
    host_root: Path, standin: StandIn, provider_env: dict[str, str]
) -> None:
    vast_answers_stopped(standin)
    standin.on("GET", r"/api/v0/instances/4242/", Answer(404, {"error": "gone"}))
    result, out = finish(
        make_spec("{action: destroy, provider: vast}"),
        verified=True,
        finish_host=host(host_root, vast_env(provider_env)),
    )
    assert result.ok and result.action == "destroy"
    assert result.provider is not None and result.provider["confirmed"]
    (delete,) = standin.made("DELETE")
    assert delete.path == "/api/v0/instances/4242/"
    about = next(i for i, x in enumerate(out.lines) if x.startswith("finish: about to vast:"))
    done = next(i for i, x in enumerate(out.lines) if x.startswith("finish: destroy: vast"))
    assert about < done
    assert VAST_KEY not in out.text


@pytest.mark.parametrize("unverified", ["stop", "keep", "poweroff"])
def test_unverified_weights_are_never_destroyed(
    unverified: str,
    host_root: Path,
    poweroff_script: Path,
    standin: StandIn,
    provider_env: dict[str, str],
) -> None:
    vast_answers_stopped(standin)
    result, out = finish(
        make_spec(f"{{action: destroy, provider: vast, unverified: {unverified}}}"),
        verified=False,
        finish_host=host(host_root, vast_env(provider_env), poweroff_script),
    )
    assert not standin.made("DELETE")
    assert "final push not verified: finish.unverified is " + unverified in out.text
    ran = Path(f"{poweroff_script}.ran")
    if unverified == "stop":
        assert result.action == "stop" and result.ok
        (put,) = standin.made("PUT")
        assert put.json() == {"state": "stopped"}
        assert "still bills its disk" in result.summary
    elif unverified == "keep":
        assert result.action == "keep" and result.ok
        assert standin.requests == [] and not ran.exists()
        assert "!!! THE MACHINE IS STILL RUNNING AND BILLING at $3.4828/h" in out.text
        assert "/state/runs/fin" in out.text
    else:
        assert result.action == "poweroff" and result.ok
        assert ran.exists() and standin.requests == []


@pytest.mark.parametrize(
    ("return_within", "method"), [("8h", "PUT"), ("14h", "PUT"), ("15h", "DELETE")]
)
def test_auto_stops_or_destroys_by_the_break_even(
    return_within: str,
    method: str,
    host_root: Path,
    standin: StandIn,
    provider_env: dict[str, str],
) -> None:
    vast_answers_stopped(standin)
    if method == "DELETE":
        standin.on("GET", r"/api/v0/instances/4242/", Answer(404, {"error": "gone"}))
    storage = (
        f"{{allocated_gb: 250, usd_per_gb_month: 0.20, rebuild_usd: 1.00, "
        f"return_within: {return_within}}}"
    )
    result, out = finish(
        make_spec(f"{{action: auto, provider: vast, storage: {storage}}}"),
        verified=True,
        finish_host=host(host_root, vast_env(provider_env)),
    )
    assert result.ok
    assert result.action == ("stop" if method == "PUT" else "destroy")
    assert [r.method for r in standin.requests if r.method != "GET"] == [method]
    assert "break-even 14.6 h" in out.text


def test_auto_on_hetzner_deletes_even_for_a_short_absence(
    host_root: Path, standin: StandIn, provider_env: dict[str, str]
) -> None:
    standin.on("GET", r"/hetzner/v1/metadata/instance-id", Answer(200, "99"))
    standin.on("DELETE", r"/v1/servers/99", Answer(200, {"action": {"id": 1}}))
    standin.on("GET", r"/v1/servers/99", Answer(404, {}))
    storage = "{allocated_gb: 250, usd_per_gb_month: 0.20, rebuild_usd: 1.00, return_within: 1h}"
    result, _ = finish(
        make_spec(f"{{action: auto, provider: hetzner, storage: {storage}}}"),
        verified=True,
        finish_host=host(host_root, {**provider_env, "HCLOUD_TOKEN": "t"}),
    )
    assert result.action == "destroy" and result.ok
    assert [r.path for r in standin.made("DELETE")] == ["/v1/servers/99"]


def test_unverified_stop_where_stopping_is_impossible_keeps_the_machine(
    host_root: Path, standin: StandIn, provider_env: dict[str, str]
) -> None:
    env = {**provider_env, "RUNSPEC_LAMBDA_INSTANCE_ID": "abc", "LAMBDA_API_KEY": "k"}
    result, out = finish(
        make_spec("{action: destroy, provider: lambda, unverified: stop}"),
        verified=False,
        finish_host=host(host_root, env),
    )
    assert result.action == "keep" and not result.ok
    assert standin.requests == []  # above all, no terminate
    assert "cannot be stopped" in out.text and "STILL RUNNING" in out.text


def test_a_provider_that_refuses_for_good_leaves_the_machine_running_loudly(
    host_root: Path, standin: StandIn, provider_env: dict[str, str]
) -> None:
    standin.on("GET", r"/api/v0/instances/4242/", Answer(403, "key revoked"))
    standin.on("DELETE", r"/api/v0/instances/4242/", Answer(403, "key revoked"))
    standin.on("PUT", r"/api/v0/instances/4242/", Answer(403, "key revoked"))
    result, out = finish(
        make_spec("{action: destroy, provider: vast}"),
        verified=True,
        finish_host=host(host_root, vast_env(provider_env)),
    )
    assert result.action == "keep" and not result.ok
    assert "HTTP 403" in result.detail
    # Refused for good: asked once each (the destroy, then the stop it falls back to).
    assert len(standin.made("DELETE")) == 1 and len(standin.made("PUT")) == 1
    assert any(line.startswith("!!! THE MACHINE IS STILL RUNNING") for line in out.lines)


def test_an_unconfirmed_destroy_is_not_ok(
    host_root: Path, standin: StandIn, provider_env: dict[str, str]
) -> None:
    vast_answers_stopped(standin)
    standin.on(
        "GET",
        r"/api/v0/instances/4242/",
        Answer(200, {"instances": {"actual_status": "running", "intended_status": "running"}}),
    )
    vast = Vast(vast_env(provider_env), clock=ManualClock(), confirm_timeout=9, poll_interval=3)
    result, out = finish(
        make_spec("{action: destroy, provider: vast}"),
        verified=True,
        finish_host=host(host_root, {}, provider=vast),
    )
    # Tried again and again until the end's window ran out, then a stop: never confirmed.
    assert result.action == "stop" and not result.ok
    assert len(standin.made("DELETE")) > 1 and len(standin.made("PUT")) > 1
    assert "still reports 'running'" in result.detail and "!!!" in out.text


def test_auto_detection_failure_keeps_the_machine(
    host_root: Path, provider_env: dict[str, str]
) -> None:
    result, out = finish(
        make_spec("{action: destroy}"),  # provider: auto, on a machine that is none of them
        verified=True,
        finish_host=host(host_root, provider_env),
    )
    assert result.action == "keep" and not result.ok
    assert "name the provider in the spec" in out.text


def test_none_with_unverified_weights_warns(host_root: Path) -> None:
    result, out = finish(
        make_spec("{action: none}"), verified=False, finish_host=host(host_root, {})
    )
    assert result.action == "none" and result.ok
    assert "!!! the final push was NOT verified" in out.text


# poweroff


def test_poweroff_runs_the_first_command_that_exists(
    host_root: Path, poweroff_script: Path
) -> None:
    fh = FinishHost(
        root=host_root,
        detect_virt=("/nonexistent/systemd-detect-virt",),
        poweroff_commands=(("/nonexistent/systemctl", "poweroff"), (str(poweroff_script),)),
    )
    result, out = finish(make_spec("{action: poweroff}"), verified=True, finish_host=fh)
    assert result.ok and result.action == "poweroff"
    assert Path(f"{poweroff_script}.ran").exists()
    assert f"running ['{poweroff_script}']" in out.text


@pytest.mark.parametrize("marker", ["dockerenv", "containerenv", "cgroup", "environ"])
def test_poweroff_is_refused_in_a_container(
    marker: str, host_root: Path, poweroff_script: Path
) -> None:
    if marker == "dockerenv":
        (host_root / ".dockerenv").touch()
    elif marker == "containerenv":
        (host_root / "run").mkdir()
        (host_root / "run/.containerenv").touch()
    elif marker == "cgroup":
        (host_root / "proc/1/cgroup").write_text("0::/system.slice/docker-abc.scope\n")
    else:
        (host_root / "proc/1/environ").write_bytes(b"container=podman\0HOME=/\0")
    result, out = finish(
        make_spec("{action: destroy, provider: vast, unverified: poweroff}"),
        verified=False,
        finish_host=host(host_root, {}, poweroff_script),
    )
    assert not Path(f"{poweroff_script}.ran").exists()
    assert result.action == "keep" and not result.ok
    assert "ends no billing" in out.text and "REFUSED" in out.text


def test_container_detection_asks_systemd_detect_virt_first(
    tmp_path: Path, host_root: Path
) -> None:
    virt = tmp_path / "detect-virt"
    virt.write_text("#!/bin/sh\necho systemd-nspawn\n")
    virt.chmod(0o755)
    reason = container_reason(FinishHost(root=host_root, detect_virt=(str(virt), "-c")))
    assert reason == "systemd-detect-virt says systemd-nspawn"
    virt.write_text("#!/bin/sh\necho none\nexit 1\n")
    assert container_reason(FinishHost(root=host_root, detect_virt=(str(virt), "-c"))) is None


# failsafe


class Recorder:
    def __init__(self, rc: int = 0) -> None:
        self.calls: list[list[str]] = []
        self.rc = rc

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        return subprocess.CompletedProcess(list(argv), self.rc, "", "")


def started(spec: Spec, state: Path, clock: ManualClock) -> tuple[RunPaths, RunRecord]:
    record = accept(spec, state, clock=clock)
    record.started_at = utc_iso(clock.time())
    record.deadline = utc_iso(clock.time() + spec.budget.wall_clock)
    return RunPaths.for_spec(spec, state), record


def systemd_root(tmp_path: Path) -> Path:
    """A file-system root on which systemd looks like PID 1 (run/systemd/system exists)."""
    root = tmp_path / "sysroot"
    (root / "run/systemd/system").mkdir(parents=True)
    return root


def test_failsafe_arms_a_transient_timer_at_deadline_plus_overrun(tmp_path: Path) -> None:
    clock = ManualClock(start=1_800_000_000.0)  # 2027-01-15 08:00:00 UTC
    spec = make_spec("{action: destroy, provider: vast, unverified: stop}", name="fs1")
    paths, record = started(spec, tmp_path / "state", clock)
    root = systemd_root(tmp_path)
    runner = Recorder()

    state = failsafe.arm(spec, paths, record, clock=clock, runner=runner, root=root)

    assert state.armed
    # 10 min wall clock + 5 min overrun + 2 min grace
    assert state.fire_at == utc_iso(1_800_000_000.0 + 600 + 300 + 120)
    assert runner.calls[0] == ["systemctl", "stop", "runspec-failsafe-fs1.timer"]
    argv = runner.calls[1]
    assert argv[:7] == [
        "systemd-run",
        "--unit=runspec-failsafe-fs1",
        "--description=runspec failsafe for run fs1",
        "--on-calendar=2027-01-15 08:17:00 UTC",
        "--timer-property=AccuracySec=1s",
        "--property=EnvironmentFile=-/etc/runspec/env",
        "--collect",
    ]
    assert argv[7:] == [
        "--",
        sys.executable,
        "-m",
        "runspec.machine.failsafe",
        "fire",
        f"--state={tmp_path / 'state'}",
        f"--spec-sha256={armed_sha256(spec)}",  # a rewritten spec is refused
        "fs1",
    ]
    assert not any(VAST_KEY in part for part in argv)
    assert (paths.job_dir / "failsafe.json").exists()

    assert failsafe.disarm(spec, paths, runner=runner, root=root)
    assert runner.calls[-1] == ["systemctl", "stop", "runspec-failsafe-fs1.timer"]
    assert not (paths.job_dir / "failsafe.json").exists()


def test_failsafe_rearmed_past_its_time_fires_a_grace_after_now(tmp_path: Path) -> None:
    clock = ManualClock(start=1_800_000_000.0)  # 2027-01-15 08:00:00 UTC
    spec = make_spec("{action: destroy, provider: vast, unverified: stop}", name="late")
    paths, record = started(spec, tmp_path / "state", clock)
    root = systemd_root(tmp_path)
    clock.advance(3600)  # the daemon comes back an hour later: deadline + overrun long gone
    runner = Recorder()
    state = failsafe.arm(spec, paths, record, clock=clock, runner=runner, root=root)
    # A calendar time in the past would never elapse; now + 2 min grace will.
    assert state.armed and state.fire_at == utc_iso(1_800_000_000.0 + 3600 + 120)
    assert "--on-calendar=2027-01-15 09:02:00 UTC" in runner.calls[1]


def test_failsafe_without_systemd_is_a_detached_watcher_stopped_at_the_end(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    spec = make_spec("{action: none}", name="fs2")
    paths, record = started(spec, tmp_path / "state", clock)
    runner, out = Recorder(), Output()
    state = failsafe.arm(
        spec, paths, record, clock=clock, runner=runner, root=tmp_path, progress=out
    )
    assert state.armed and runner.calls == []  # no systemd-run: a watcher process instead
    # finish: none: the failsafe ends nothing, and says so (not "finish.unverified (stop)").
    assert (
        "no systemd here: a detached watcher applies nothing to the machine (finish.action is "
        "none)" in out.text
    )
    assert f"--at={1_800_000_000 + 600 + 300 + 120}" in state.command
    wait_for(paths.failsafe_watch.exists)
    pid = json.loads(paths.failsafe_watch.read_text())["pid"]
    assert os.getsid(pid) != os.getsid(0)  # a session of its own: it outlives ours
    assert failsafe.disarm(spec, paths, runner=runner, root=tmp_path, progress=out)
    wait_for(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie")
    assert "the watcher stopped" in out.text


def test_failsafe_fires_only_for_a_run_that_has_not_ended(tmp_path: Path, host_root: Path) -> None:
    clock = ManualClock()
    state_dir = tmp_path / "state"
    spec = make_spec("{action: destroy, provider: vast, unverified: keep}", name="fs3")
    _, record = started(spec, state_dir, clock)
    store = RecordStore(state_dir, clock)
    record.status = RunStatus.TRAINING
    store.save(record)
    # A checkpoint on the disk that no push ever verified: the run is not safe elsewhere.
    write_checkpoint(state_dir / "runs/fs3/weights/last.pt", 2)

    out = Output()
    code = failsafe.fire(state_dir, "fs3", clock=clock, progress=out, host=host(host_root, {}))
    assert code == 0  # keep did what it was told
    saved = store.load("fs3")
    # The failsafe never writes the run's record: its own file says what it did.
    assert saved is not None and saved.finish is None and saved.status is RunStatus.TRAINING
    fired = json.loads((state_dir / "jobs/fs3/failsafe.json").read_text())["fired"]
    assert fired["applied"] and fired["result"]["action"] == "keep"
    assert not fired["result"]["verified"]
    assert "still training past deadline + overrun" in out.text

    saved.status = RunStatus.FINISHED
    store.save(saved)
    # The real entry point the timer runs, in its own process.
    proc = subprocess.run(
        [sys.executable, "-m", "runspec.machine.failsafe", "fire", f"--state={state_dir}", "fs3"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "the run has ended; nothing to do" in proc.stdout
    final = store.load("fs3")
    assert final is not None and final.finish is None


def test_the_suite_forbids_the_real_poweroff_even_outside_a_container(host_root: Path) -> None:
    fh = FinishHost(root=host_root, detect_virt=("/nonexistent/systemd-detect-virt",))
    assert fh.poweroff_commands == (("systemctl", "poweroff"), ("shutdown", "-h", "now"))
    result, out = finish(make_spec("{action: poweroff}"), verified=True, finish_host=fh)
    assert result.action == "keep" and not result.ok
    assert "RUNSPEC_TEST_NO_POWEROFF is set" in out.text
