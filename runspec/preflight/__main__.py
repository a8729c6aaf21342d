"""The preflight child: `python -m runspec.preflight --spec FILE --state DIR --phase P [--json]`.

It imports torch (the daemon never does), runs the checks of its phase and prints the report.
Exit status: 0 no check failed, 1 a check failed, 2 usage or an invalid spec.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from runspec.checkresult import CheckResult, CheckStatus, failed
from runspec.dataset.datayaml import data_yaml_check
from runspec.dataset.staging import expected_data_yaml, hf_home_for
from runspec.errors import RunspecError
from runspec.preflight import checks, datafound, disk, sandbox
from runspec.preflight.collective import collective_check, collective_wanted
from runspec.preflight.datafound import data_yaml_root_check
from runspec.preflight.profile import profile_check
from runspec.preflight.report import PreflightReport
from runspec.preflight.watchcheck import watch_check
from runspec.secrets.childwalls import wall_in
from runspec.spec.loader import load_accepted, load_spec
from runspec.spec.model import Spec
from runspec.store.offlimits import off_limits
from runspec.store.paths import RunPaths, StateLayout

DEFAULT_TIMEOUT_S = 120.0
# NCCL's rendezvous on one machine takes seconds; a minute and more is a hang.
COLLECTIVE_MAX_S = 120.0


def _guarded(name: str, check: Callable[[], list[CheckResult]]) -> list[CheckResult]:
    """One broken check must not hide the others' results."""
    try:
        return check()
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        return [
            failed(
                name,
                f"the check crashed: {type(exc).__name__}: {first}",
                "report this with `runspec -v preflight SPEC`",
            )
        ]


def machine_checks(
    spec: Spec, paths: RunPaths, timeout: float, collective_one_gpu: bool = False
) -> list[CheckResult]:
    results = _guarded("versions", checks.version_checks)
    if not any(r.name == "torch" and r.status.value == "pass" for r in results):
        return results
    results += _guarded("gpu", lambda: _gpu_checks(spec, timeout, collective_one_gpu))
    # Before the disk and push checks, which write too: a sandbox's refusal names its fix.
    results += _guarded("writable", lambda: [sandbox.writable_check(spec, paths)])
    results += _guarded("dataset", lambda: datafound.staged_checks(spec, paths))
    data_bytes, note = checks.dataset_bytes(spec, paths.data_root)
    if note is not None:
        results.append(note)
    results += _guarded(
        "disk",
        lambda: [
            disk.disk_check(spec, paths.run_dir, paths.data_root, data_bytes, paths.staged_dir)
        ],
    )
    results += _guarded(
        "hf_home",
        lambda: [disk.hf_home_check(hf_home_for(spec), Path("/proc/self/mountinfo").read_text())],
    )
    results += _guarded("push", lambda: [checks.push_check(spec, paths)])
    results += _guarded("watch", lambda: [watch_check(spec)])
    results += _guarded("weights", lambda: [checks.weights_check(spec, paths)])
    return results


def _gpu_checks(spec: Spec, timeout: float, collective_one_gpu: bool) -> list[CheckResult]:
    from runspec.preflight import gpu  # noqa: PLC0415 (torch: the dataset phase needs none)

    selection = gpu.select_gpus(spec.train)
    results = [selection.check]
    if selection.check.status.value == "fail":
        return results
    for index in selection.gpus:
        arch = gpu.arch_supported(index)
        if arch is not None:
            results.append(arch)
        if spec.preflight.matmul:
            results.append(gpu.matmul_check(f"cuda:{index}"))

    if collective_wanted(spec.preflight.collective, len(selection.gpus), collective_one_gpu):
        results.append(collective_check(selection.gpus, min(timeout, COLLECTIVE_MAX_S)))
    return results


def dataset_checks(spec: Spec, paths: RunPaths) -> list[CheckResult]:
    data_yaml = expected_data_yaml(spec, paths)
    imgsz = spec.train.imgsz if isinstance(spec.train.imgsz, int) else max(spec.train.imgsz)
    results: list[CheckResult] = []

    if spec.dataset.path is not None and not data_yaml.is_file():
        return []  # no staging makes it: the machine phase's dataset check FAILs, saying so
    root = data_yaml_root_check(data_yaml)
    if root is not None:
        return [root]  # the doctor would only say the splits do not exist; this says why
    if data_yaml.is_file():  # staged: it must keep to its folder before LibreYOLO reads it
        kept = data_yaml_check(data_yaml, spec.train.args)
        if kept.status is CheckStatus.FAIL:
            return [kept]
        results.append(kept)
    if spec.preflight.doctor:
        results += _guarded("doctor", lambda: [checks.doctor_check(data_yaml, imgsz)])
    if spec.preflight.profile:
        results += _guarded("profile", lambda: [profile_check(spec, paths, data_yaml)])
    return results


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runspec.preflight")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--spec", type=Path, help="a run spec (YAML), judged here")
    parser.add_argument("--base", type=Path, help="the folder its relative paths mean")
    which.add_argument("--run", help="a run accepted into the state folder, by its name")
    parser.add_argument("--state", type=Path, required=True, help="the state folder")
    parser.add_argument("--project", type=Path, help="where run folders go (default: the spec's)")
    parser.add_argument("--data-root", type=Path, help="where datasets go (default: the spec's)")
    parser.add_argument("--phase", choices=("machine", "dataset", "all"), default="all")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="inner bound (s)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--collective-one-gpu",
        action="store_true",
        help="run the collective check on a single selected GPU too",
    )
    return parser


def _claim_stdout() -> TextIO:
    """Send everything else written to stdout (libreyolo's prints, C-level writes) to stderr,
    so that stdout holds only the report; returns a stream to the real stdout."""
    sys.stdout.flush()
    real = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return real


def _spec_and_paths(args: argparse.Namespace) -> tuple[Spec, RunPaths]:
    state = args.state.absolute()
    if args.run is not None:  # accepted: its saved spec, never judged again, and saved paths
        paths = StateLayout(state).run_paths(args.run)
        return load_accepted(paths.spec_file), paths
    spec = load_spec(args.spec, base=args.base)
    paths = RunPaths.for_spec(spec, state)
    # Relative folders in a spec mean relative to the state folder (as staging reads them);
    # this child runs in a temporary folder.
    return spec, RunPaths(
        state=state,
        name=paths.name,
        project=state / (args.project or paths.project),
        data_root=state / (args.data_root or paths.data_root),
    )


def _wall_in(state: Path) -> None:
    """Before any third-party code loads (runspec.secrets.childwalls)."""
    for refused in wall_in(off_limits(StateLayout(state))):
        print(f"runspec preflight: {refused}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _wall_in(args.state.absolute())
    out = _claim_stdout()
    started = time.monotonic()
    try:
        spec, paths = _spec_and_paths(args)
    except RunspecError as exc:
        print(f"runspec preflight: {exc}", file=sys.stderr)
        return 2  # this child's own protocol (see the docstring); the parent reads stderr
    results: list[CheckResult] = []
    if args.phase in ("machine", "all"):
        results += machine_checks(spec, paths, args.timeout, args.collective_one_gpu)
    if args.phase in ("dataset", "all"):
        results += dataset_checks(spec, paths)
    report = PreflightReport(args.phase, results, time.monotonic() - started)
    with out:
        if args.json:
            json.dump(report.to_json(), out)
            out.write("\n")
        else:
            out.write(report.render_text() + "\n")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
