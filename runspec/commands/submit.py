"""`runspec submit SPEC`: validate, record provenance, copy atomically into the inbox.

The user's file stays where it is. The provenance goes first, as a dotfile the inbox ignores,
so the daemon finds it when the spec itself appears (renamed in, never half-written).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from runspec.commands import add_format, add_state, print_json, state_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", type=Path, help="the spec file")
    parser.add_argument("--inbox", type=Path, default=None, help="the daemon's inbox")
    add_state(parser)
    add_format(parser)


def run(args: argparse.Namespace) -> int:
    import json

    from runspec.atomic import write_bytes
    from runspec.clock import SYSTEM, utc_iso
    from runspec.daemon.inbox import provenance_sidecar
    from runspec.errors import SpecInvalid, UsageError
    from runspec.loader import load_spec_text
    from runspec.provenance import describe_submission

    try:
        data = args.spec.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {args.spec}: {exc.strerror}") from exc
    try:
        spec = load_spec_text(data, str(args.spec))
    except SpecInvalid as exc:
        if args.format == "json":
            print_json({"submitted": False, "problems": [p.as_dict() for p in exc.problems]})
        else:
            for problem in exc.problems:
                print(problem)
        return 1
    inbox = (args.inbox or state_dir(args) / "inbox").absolute()
    if not inbox.is_dir():
        raise UsageError(f"the inbox {inbox} does not exist; is the daemon installed? (--inbox)")
    target = inbox / f"{spec.name}.yaml"
    if target.exists():
        raise UsageError(f"{target} is already waiting in the inbox")
    provenance = describe_submission(args.spec, utc_iso(SYSTEM.time()))
    provenance["sha256"] = spec.sha256
    sidecar = provenance_sidecar(inbox, target.name)
    write_bytes(sidecar, json.dumps(provenance, indent=2).encode())
    write_bytes(target, data)
    if args.format == "json":
        print_json({"submitted": True, "name": spec.name, "inbox_file": str(target), **provenance})
    else:
        git = provenance.get("git")
        where = ""
        if git:
            dirty = " (dirty tree)" if git["dirty"] else ""
            where = f" from {git['path']} at {(git['commit'] or 'no commit')[:12]}{dirty}"
        print(f"submitted {spec.name}{where} -> {target}")
        print(f"follow it with: runspec status {spec.name}   (or runspec logs {spec.name} -f)")
    return 0
