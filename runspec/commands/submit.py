"""`runspec submit SPEC`: validate, record provenance, copy atomically into the inbox.

The user's file stays where it is. The provenance goes first, as a dotfile the inbox ignores,
so the daemon finds it when the spec itself appears (renamed in, never half-written).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from runspec.commands import add_format, add_state, print_json, state_dir
from runspec.errors import Outcome, Problem
from runspec.store.paths import CONFIG_FILE

if TYPE_CHECKING:
    from runspec.daemon.config import DaemonConfig
    from runspec.spec.model import Spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", type=Path, help="the spec file")
    parser.add_argument("--inbox", type=Path, default=None, help="the daemon's inbox")
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help=f"the daemon's config, for where its runs go (default {CONFIG_FILE})",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue this stopped run (as `runspec run --resume`); the daemon then drives it",
    )
    parser.add_argument(
        "--keep-budget", action="store_true", help="with --resume: keep the budget that is left"
    )
    add_state(parser)
    add_format(parser)


def _invalid(args: argparse.Namespace, problems: list[Problem]) -> Outcome:
    if args.format == "json":
        print_json(
            {
                "submitted": False,
                "error": Outcome.INVALID.value,
                "problems": [p.as_dict() for p in problems],
            }
        )
    else:
        for problem in problems:
            print(problem)
    return Outcome.INVALID


def _resume(args: argparse.Namespace, spec: Spec, config: DaemonConfig) -> str:
    """Reopen the stopped run under its lock (refused while the daemon drives it)."""
    from runspec.errors import UsageError
    from runspec.run.resume import resume_run
    from runspec.store.owner import RunLock
    from runspec.store.paths import RunPaths

    if not args.resume:
        raise UsageError("--keep-budget goes with --resume")
    lock = RunLock(RunPaths.decide(spec, config.state, runs=config.runs, data=config.data))
    lock.acquire()
    try:
        done = resume_run(
            spec,
            config.state,
            keep_budget=args.keep_budget,
            via="runspec submit --resume",
            runs=config.runs,
            data=config.data,
        )
    finally:
        lock.release()
    where = done.checkpoint.name if done.checkpoint is not None else "its preflight"
    return f"{spec.name}: resumes from {where} ({done.source}); {done.budget_line}"


def run(args: argparse.Namespace) -> Outcome:
    import json

    from runspec.clock import SYSTEM, utc_iso
    from runspec.daemon import perms
    from runspec.daemon.config import load_config
    from runspec.errors import SpecInvalid, UsageError
    from runspec.printable import printable
    from runspec.run.accept import check_name
    from runspec.spec.loader import load_spec_text
    from runspec.spec.provenance import describe_submission
    from runspec.spec.specbase import resolved_paths
    from runspec.spec.specread import NotRegularFile, SpecTooBig, read_spec
    from runspec.spec.yamlload import too_big
    from runspec.store.atomic import write_bytes
    from runspec.store.hint import command
    from runspec.store.owner import daemon_holder
    from runspec.store.paths import StateLayout, provenance_sidecar
    from runspec.voice import warning

    # The same reader as the inbox's: a FIFO or a device is refused at once, and nothing is
    # read past the size limit (`runspec submit /dev/zero` must not eat the machine's memory).
    try:
        data = read_spec(args.spec)
    except SpecTooBig as exc:
        return _invalid(args, [too_big(exc.size, str(args.spec))])
    except NotRegularFile as exc:
        raise UsageError(f"cannot read {args.spec}: {exc}") from exc
    except OSError as exc:
        raise UsageError(f"cannot read {args.spec}: {exc.strerror or exc}") from exc
    try:
        spec = load_spec_text(data, str(args.spec), base=args.spec.absolute().parent)
    except SpecInvalid as exc:
        return _invalid(args, exc.problems)
    inbox = (args.inbox or state_dir(args) / "inbox").absolute()
    if not inbox.is_dir():
        raise UsageError(f"the inbox {inbox} does not exist; is the daemon installed? (--inbox)")
    perms.check([inbox, state_dir(args)])
    target = inbox / f"{spec.name}.yaml"
    if target.exists():
        raise UsageError(f"{target} is already waiting in the inbox")
    # The daemon would refuse a taken name into rejected/ and sit idle: say so now, here.
    config = load_config(args.config, state=state_dir(args))
    resumed = _resume(args, spec, config) if args.resume or args.keep_budget else None
    existing = check_name(spec, config.state, runs=config.runs, data=config.data)
    if existing is not None and resumed is None:
        # The same spec, not finished: a second copy would only wait behind the first.
        raise UsageError(
            f"{spec.name} is already under way ({existing.status.value}): nothing submitted; "
            f"{command(f'status {spec.name}', state_dir(args))} shows it"
        )
    provenance = describe_submission(args.spec, utc_iso(SYSTEM.time()))
    provenance["sha256"] = spec.sha256
    # What its relative paths mean, as the daemon will read them (runspec.spec.specbase).
    provenance["spec_dir"] = str(args.spec.absolute().parent)
    if resolved := resolved_paths(spec):
        provenance["resolved"] = resolved
    sidecar = provenance_sidecar(inbox, target.name)
    write_bytes(sidecar, json.dumps(provenance, indent=2).encode())
    write_bytes(target, data)
    state = state_dir(args)
    running = daemon_holder(StateLayout(state)) is not None
    if args.format == "json":
        print_json(
            {
                "submitted": True,
                "name": spec.name,
                "inbox_file": str(target),
                "daemon_running": running,
                **provenance,
            }
        )
    else:
        git = provenance.get("git")
        where = ""
        if git:
            dirty = " (dirty tree)" if git["dirty"] else ""
            where = f" from {git['path']} at {(git['commit'] or 'no commit')[:12]}{dirty}"
        if resumed is not None:
            print(printable(resumed))
        print(printable(f"submitted {spec.name}{where} -> {target}"))
        if running:
            print(
                f"follow it with: {command(f'status {spec.name}', state)}   "
                f"(or {command(f'logs {spec.name} -f', state)})"
            )
        else:
            print(
                warning(
                    f"no daemon is running on {state}: the spec waits in the inbox until one "
                    "starts (`sudo systemctl start runspecd`, or "
                    f"`{command('daemon --detach', state)}` in a container without systemd); "
                    f"{command(f'status {spec.name}', state)} shows it waiting"
                )
            )
    return Outcome.OK
