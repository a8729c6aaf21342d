"""`runspec daemon`: the daemon in the foreground (what runspecd.service runs), or `--detach`ed
where there is no systemd to keep it (many rented machines are containers)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from runspec.commands import add_format, add_state, print_json
from runspec.errors import Outcome
from runspec.store.paths import CONFIG_FILE

READY_WAIT_S = 60.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_state(parser)
    parser.add_argument(
        "--inbox", type=Path, default=None, help="watched folder (default <state>/inbox)"
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help=f"config file (default {CONFIG_FILE}; missing means defaults)",
    )
    parser.add_argument("--once", action="store_true", help="exit when the queue is empty")
    parser.add_argument(
        "--dry-run", action="store_true", help="print finish actions instead of doing them"
    )
    parser.add_argument(
        "--detach",
        action="store_true",
        help="run in the background, outliving this shell and the SSH session: its pid in "
        "<state>/runspecd.pid, its output in <state>/runspecd.log",
    )
    parser.add_argument(
        "--stop",
        action="store_true",
        help="stop the daemon of this state folder and wait (SIGTERM: it pushes the newest "
        "checkpoint, verified, then exits; the trainer trains on, detached, until a daemon "
        "drives it again)",
    )
    parser.add_argument(
        "--env-file",
        type=Path,
        default=None,
        help="the secrets' file (default /etc/runspec/env; under systemd the unit reads it)",
    )
    add_format(parser)  # json: one JSON object per line (time, priority, text)


def run(args: argparse.Namespace) -> Outcome:
    from runspec.daemon.config import load_config
    from runspec.daemon.loop import main
    from runspec.secrets import envfile
    from runspec.store.paths import ENV_FILE
    from runspec.voice import Stream, set_live, setup_logging

    config = load_config(
        args.config,
        state=args.state.absolute() if args.state else None,
        inbox=args.inbox.absolute() if args.inbox else None,
    )
    if args.dry_run:
        config = config.with_overrides(finish_dry_run=True)
    if args.stop:
        from runspec.commands.daemonstop import stop

        return stop(config.state, args.format == "json")
    if args.detach:
        return _detach(config.state, args.format == "json")
    if args.env_file is not None or not envfile.started_by_systemd():
        envfile.load(args.env_file or ENV_FILE)
    # One stream for the daemon's lines and its log: the journal keeps them in order.
    stream = Stream(sys.stdout, json_lines=args.format == "json")
    setup_logging(stream, args.verbose, tag="runspecd")
    set_live(stream.live)
    main(config, args.config, once=args.once, say=stream)
    return Outcome.OK


def _detach(state: Path, as_json: bool) -> Outcome:
    """Start this same command without --detach in a session of its own, wait until it holds
    the state folder, and leave it running."""
    from runspec.childpython import isolated
    from runspec.clock import SYSTEM
    from runspec.errors import RunspecError
    from runspec.store.hint import command
    from runspec.store.owner import daemon_holder
    from runspec.store.paths import StateLayout

    layout = StateLayout(state)
    running = daemon_holder(layout)
    if running is not None:  # what was asked is already true: not an error
        if as_json:
            print_json({"pid": running.pid, "log": str(layout.daemon_log), "already": True})
        else:
            print(f"runspecd already running (pid {running.pid}), log {layout.daemon_log}")
        return Outcome.OK
    argv = [a for a in sys.argv[1:] if a != "--detach"]
    if "--state" not in argv and not any(a.startswith("--state=") for a in argv):
        argv += ["--state", str(state)]
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    with layout.daemon_log.open("ab") as log:
        proc = subprocess.Popen(
            isolated(sys.executable, "runspec", *argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # no terminal: the SSH session's end sends it nothing
            close_fds=True,
        )
    end = SYSTEM.monotonic() + READY_WAIT_S
    while SYSTEM.monotonic() < end:
        holder = daemon_holder(layout)
        if holder is not None and holder.pid == proc.pid:
            layout.daemon_pid.write_text(f"{proc.pid}\n")
            if as_json:
                print_json({"pid": proc.pid, "log": str(layout.daemon_log)})
                return Outcome.OK
            print(f"runspecd started: pid {proc.pid}, log {layout.daemon_log}")
            print(f"stop it with: {command('daemon --stop', state)}")
            return Outcome.OK
        if proc.poll() is not None:
            tail = layout.daemon_log.read_text(errors="replace").splitlines()[-5:]
            raise RunspecError("the daemon did not start:\n" + "\n".join(tail))
        SYSTEM.sleep(0.1)
    raise RunspecError(f"the daemon did not take {state} within {READY_WAIT_S:.0f} s")
