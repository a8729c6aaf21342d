"""`runspec install`: the unit, the folders and a default config, in place (`--root` for tests)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from runspec.commands import add_format, print_json
from runspec.errors import Outcome

UNIT_NAME = "runspecd.service"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=Path("/"), help="install under this root")
    parser.add_argument(
        "--exec",
        dest="executable",
        type=Path,
        default=None,
        help="the runspec program the unit runs (default: the one running this command)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing config")
    add_format(parser)


def unit_source() -> Path:
    # Package data: a link to systemd/ in a checkout, the file itself in an installed wheel.
    return Path(__file__).resolve().parent.parent / "data" / UNIT_NAME


def unit_text(executable: Path) -> str:
    text = unit_source().read_text()
    return text.replace("/usr/local/bin/runspec daemon", f"{executable} daemon")


def _under(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def run(args: argparse.Namespace) -> Outcome:
    from runspec.daemon.config import DEFAULT_CONFIG_TEXT
    from runspec.errors import UsageError

    root: Path = args.root.absolute()
    executable = args.executable or Path(sys.argv[0]).absolute()
    if not executable.is_absolute() or not os.access(executable, os.X_OK):
        found = shutil.which("runspec")
        if found is None:
            raise UsageError("cannot find the runspec program; pass --exec /path/to/runspec")
        executable = Path(found)
    done: list[str] = []
    etc = _under(root, "/etc/runspec")
    etc.mkdir(parents=True, exist_ok=True)
    os.chmod(etc, 0o755)
    state = _under(root, "/var/lib/runspec")
    for folder in (state, state / "inbox"):
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)  # the inbox can end the machine; the state holds run records
        done.append(f"folder {folder} (0700)")
    config = etc / "runspecd.yaml"
    if args.force or not config.exists():
        config.write_text(DEFAULT_CONFIG_TEXT)
        os.chmod(config, 0o644)
        done.append(f"config {config}")
    env = etc / "env"
    if not env.exists():
        env.write_text("# HF_TOKEN=hf_...   (this file stays 0600: it holds secrets)\n")
        os.chmod(env, 0o600)
        done.append(f"environment file {env} (0600)")
    unit_dir = _under(root, "/etc/systemd/system")
    unit_dir.mkdir(parents=True, exist_ok=True)
    unit = unit_dir / UNIT_NAME
    unit.write_text(unit_text(executable))
    os.chmod(unit, 0o644)
    done.append(f"unit {unit}")
    nxt = "systemctl daemon-reload && systemctl enable --now runspecd"
    if args.format == "json":
        print_json({"installed": done, "next": nxt if root == Path("/") else None})
        return Outcome.OK
    for line in done:
        print(f"installed {line}")
    if root == Path("/"):
        print(f"next: {nxt}")
    return Outcome.OK
