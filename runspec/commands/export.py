"""`runspec export SPEC --to skypilot|dstack [-o FILE]`: the engine's task file for a spec."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from runspec.commands import add_format, print_json
from runspec.errors import Outcome, UsageError

if TYPE_CHECKING:
    from runspec.engines.task import JobPlan

ENGINES = ("skypilot", "dstack")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", type=Path, help="the run spec (YAML)")
    parser.add_argument("--to", required=True, choices=ENGINES, help="the engine")
    parser.add_argument("-o", "--output", type=Path, help="write here (default: standard output)")
    parser.add_argument(
        "--infra",
        help="SkyPilot only: where to rent (its `infra:`, e.g. aws, gcp/us-central1, runpod)",
    )
    add_plan_arguments(parser)
    add_format(parser)


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    """What `export` and `launch` share: how runspec is installed on the engine's machine."""
    from runspec.installref import INSTALL_EXAMPLE, INSTALL_VARIABLE

    parser.add_argument(
        "--install",
        default=os.environ.get(INSTALL_VARIABLE),
        help=f"the pip requirement that installs runspec there, a direct reference such as "
        f"{INSTALL_EXAMPLE!r} (default ${INSTALL_VARIABLE})",
    )
    parser.add_argument(
        "--setup",
        default="15m",
        help="the time the install takes before the budget starts (default 15m): added to "
        "the engine's time cap so that it never cuts the run short",
    )


def plan_from(args: argparse.Namespace) -> JobPlan:
    from runspec.engines.task import JobPlan
    from runspec.installref import install_problem
    from runspec.spec.loader import load_spec
    from runspec.units import parse_duration

    if (why := install_problem(args.install)) is not None:
        raise UsageError(why)
    try:
        setup = parse_duration(args.setup)
    except ValueError as exc:
        raise UsageError(f"--setup {args.setup}: {exc}") from exc
    return JobPlan(spec=load_spec(args.spec), install=args.install, setup=setup)


def _beside(output: Path, kind: str) -> Path:
    """task.dstack.yml -> task.dstack.fleet.yml"""
    return output.with_name(f"{output.stem}.{kind}{output.suffix or '.yml'}")


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def run(args: argparse.Namespace) -> Outcome:
    from runspec.engines import export_dstack, export_skypilot
    from runspec.engines.task import task_yaml

    plan = plan_from(args)
    spec = plan.spec
    secrets = plan.secret_names()
    fleet: dict[str, object] | None = None
    fleet_file: Path | None = None
    if args.to == "skypilot":
        task = export_skypilot.skypilot_task(plan, args.infra)
        hint = functools.partial(export_skypilot.launch_hint, secrets=secrets)
    else:
        if args.infra:
            raise UsageError("--infra is SkyPilot's; dstack chooses by its own fleets")
        task = export_dstack.dstack_task(plan)
        fleet = export_dstack.dstack_fleet(plan)
        fleet_file = None if args.output is None else _beside(args.output, "fleet")
        if fleet is not None and fleet_file is None:
            raise UsageError(
                f"a dstack run across {spec.resources.nodes} nodes comes with its fleet, "
                "written beside the task: give -o FILE"
            )
        shown = None if fleet is None else (str(fleet_file), str(fleet["name"]))
        hint = functools.partial(export_dstack.launch_hint, secrets=secrets, fleet=shown)
    header = (
        f"Written by runspec export from the spec {spec.name} (sha256 {spec.sha256}).\n"
        "The engine owns the machines; runspec owns done: it exits 0 once the final push\n"
        "is verified, 75 for a fresh machine, 2 for a mistake no retry fixes, 3 unverified."
    )
    text = task_yaml(task, header)
    where = "FILE" if args.output is None else str(args.output)
    if args.output is not None:
        _write(args.output, text)
    if fleet is not None and fleet_file is not None:
        _write(fleet_file, task_yaml(fleet, header.split("\n", 1)[0] + " (the run's fleet)"))
    if args.format == "json":
        file = None if args.output is None else str(args.output)
        found = {"task": task, "launch": hint(where)}
        if fleet is not None:
            found |= {"fleet": fleet, "fleet_file": str(fleet_file)}
        print_json({"engine": args.to, "file": file, **found})
    elif args.output is None:
        sys.stdout.write(text)
        print(f"then: {hint(where)}", file=sys.stderr)
    else:
        print(f"wrote {args.output}; launch it with: {hint(where)}")
    return Outcome.OK
