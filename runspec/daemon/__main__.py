"""`python -m runspec.daemon`: the same as `runspec daemon`, without the other commands."""

from __future__ import annotations

import argparse
import logging
import sys

from runspec.commands import daemon
from runspec.errors import RunspecError


def main() -> int:
    parser = argparse.ArgumentParser(prog="runspec daemon")
    daemon.add_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return daemon.run(args)
    except RunspecError as exc:
        print(f"runspec: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
