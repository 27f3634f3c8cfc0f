"""Start-up cost of the commands people and editors launch most.

Wall time and peak RSS of `raven --help`, `raven --version`, `raven run --model
echo hi` and `raven sessions list`, 10 runs each; medians, and each as a multiple of
`python -c pass` (the floor) measured in the same run. Aims: run within 15x, --help and
--version within 8x; #59's (in instructions, `valgrind --tool=callgrind`, as the clock
moves with load): run at most 2x `typer + pydantic + rich`, sessions list at most a
third of run.

Then what importing the libraries DESIGN.md puts on these paths costs on its own
(asyncio; typer; pydantic with Raven's config schema), the part of each command's
time Raven's code cannot remove.

    uv run python bench/startup.py [--runs N]

Byte-code caches are allowed (as on a user's machine): one warm-up run precedes each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "raven --help": [sys.executable, "-m", "raven", "--help"],
    "raven --version": [sys.executable, "-m", "raven", "--version"],
    "raven run --model echo hi": [sys.executable, "-m", "raven", "run", "--model", "echo", "hi"],
    "raven sessions list": [sys.executable, "-m", "raven", "sessions", "list"],
}
LIBRARIES = {
    "import asyncio": [sys.executable, "-c", "import asyncio"],
    "import typer": [sys.executable, "-c", "import typer"],
    "import the config schema": [sys.executable, "-c", "import raven.config.schema"],
    "all three": [sys.executable, "-c", "import asyncio, typer, raven.config.schema"],
    "typer + pydantic + rich": [sys.executable, "-c", "import typer, pydantic, rich.console"],
}


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one run of `argv`."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} exited {proc.returncode}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "RAVEN_HOME": home}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        print(f"{'command':32} {'median ms':>10} {'min ms':>8} {'x floor':>8} {'peak RSS MiB':>13}")
        floor = 0.0
        for heading, table in (("", COMMANDS), ("what the libraries alone cost:", LIBRARIES)):
            if heading:
                print(heading)
            for name, argv in table.items():
                measure(argv, env)
                samples = [measure(argv, env) for _ in range(runs)]
                walls = [w * 1000 for w, _ in samples]
                median = statistics.median(walls)
                floor = floor or median
                rss = statistics.median(r for _, r in samples)
                print(
                    f"{name:32} {median:10.0f} {min(walls):8.0f} {median / floor:8.1f} {rss:13.1f}"
                )


if __name__ == "__main__":
    main()
