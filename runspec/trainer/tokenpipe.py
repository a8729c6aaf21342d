"""`python -m runspec.trainer.tokenpipe PROGRAM [ARG...]`: PROGRAM with the Hub token from stdin.

A trainer started as a transient unit needs the Hub token only to fetch a model from a Hub repo,
and the token must not travel in a unit property (`systemctl show` prints every one, and
systemd keeps them in /run/systemd/transient/), on a command line (`ps`), or in any new file.
The launcher starts the unit with `systemd-run --pipe`, whose stdin becomes the unit's: a pipe
holding the token and nothing else. This reads it to the end, puts /dev/null in its place (the
trainer's children never see the pipe) and execs PROGRAM with HF_TOKEN set: exec keeps the pid,
so the unit's main pid is the trainer's.
"""

from __future__ import annotations

import os
import sys

# A Hub token is under a hundred bytes; a pipe holding more was not written by the launcher.
MAX_BYTES = 4096


def read_token(fd: int = 0) -> str:
    data = b""
    while chunk := os.read(fd, MAX_BYTES + 1 - len(data)):
        data += chunk
        if len(data) > MAX_BYTES:
            raise ValueError(f"more than {MAX_BYTES} bytes on stdin: not a token")
    return data.decode("utf-8").strip()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or not os.path.isabs(args[0]):
        print("usage: python -m runspec.trainer.tokenpipe /abs/program [arg...]", file=sys.stderr)
        return 2
    try:
        token = read_token()
    except (OSError, ValueError) as exc:
        print(f"runspec.trainer.tokenpipe: no token read: {exc}", file=sys.stderr)
        return 2
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    env = dict(os.environ)
    if token:
        env["HF_TOKEN"] = token
    os.execve(args[0], args, env)
    return 127  # not reached: execve returns only by raising


if __name__ == "__main__":
    sys.exit(main())
