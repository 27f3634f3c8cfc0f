"""What the sandbox adds to starting a command: `run_command`'s path (`run_shell`) on
`true`, without a sandbox and under `workspace` and `strict` (no network: a namespace of
its own), side by side in interleaved rounds. Aim: at most 10 ms more per command.

    uv run python bench/sandbox.py [--rounds 7] [--runs 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from raven.sandbox import Sandbox, enforcement
from raven.tools.shell import run_shell

SANDBOXES = {"off": Sandbox(), "workspace": Sandbox("workspace"), "strict": Sandbox("strict")}


async def one(sandbox: Sandbox, cwd: Path) -> float:
    start = time.perf_counter()
    out = await run_shell("true", cwd, 30, 1000, None, sandbox)
    assert not out.is_error, out.text
    return (time.perf_counter() - start) * 1000


async def main(rounds: int, runs: int) -> None:
    print(enforcement("strict"))
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        medians: dict[str, list[float]] = {name: [] for name in SANDBOXES}
        for _ in range(rounds):
            for name, sandbox in SANDBOXES.items():
                times = [await one(sandbox, cwd) for _ in range(runs)]
                medians[name].append(statistics.median(times))
    base = statistics.median(medians["off"])
    for name, each in medians.items():
        median = statistics.median(each)
        spread = f"{min(each):.2f}–{max(each):.2f}"
        print(f"{name:10} median {median:6.2f} ms (rounds {spread}); +{median - base:.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.runs))
