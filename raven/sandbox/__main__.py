"""`python -m raven.sandbox --level L --cwd DIR --temp DIR [--private P]… [--allow H:P]… --
COMMAND ARGS…`: run COMMAND in that sandbox, for what Raven does not start itself (the MCP
SDK starts stdio servers). Confines itself, then becomes COMMAND (exec): nothing of it
stays. Where the kernel cannot hold the level, says so on stderr and exits 126, running
nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from raven.sandbox import LEVELS, Sandbox, SandboxUnavailable

NOT_RUN = 126


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m raven.sandbox")
    parser.add_argument("--level", choices=LEVELS, required=True)
    parser.add_argument("--cwd", type=Path, required=True)
    parser.add_argument("--temp", type=Path, required=True)
    parser.add_argument("--private", type=Path, action="append", default=[])
    parser.add_argument("--allow", action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    sandbox = Sandbox(args.level, True, tuple(args.allow), tuple(args.private))
    try:
        confined = sandbox.confine(args.cwd, args.temp)
    except SandboxUnavailable as exc:
        print(f"raven: {exc}", file=sys.stderr)
        return NOT_RUN
    if confined is not None and (enter := confined.preexec()) is not None:
        enter()
    os.chdir(args.cwd)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"raven: cannot run {command[0]!r}: {exc.strerror}", file=sys.stderr)
    return NOT_RUN


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
