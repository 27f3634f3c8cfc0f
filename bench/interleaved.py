"""Two (or more) Raven checkouts side by side: one `raven a2a serve` each, with sessions
and A2A tasks in one throwaway PostgreSQL database of its own (or, named `sqlite:DIR`,
on SQLite with tasks in memory), driven in interleaved rounds at one level of clients.
Prints each one's median requests/s, p50 and CPU per task: a change measured against
the commit before it in the same run, since this host's speed drifts between runs.

    git worktree add /tmp/before <commit>
    uv run python bench/interleaved.py /tmp/before . --clients 1 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from loadgen import cpu_s, free_port, load, wait_listening
from replicas import configure

sys.path.insert(0, str(Path(__file__).parent.parent))
from tests.postgres import fresh_database, postgres_server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkouts", nargs="+", help="directories; sqlite:DIR for SQLite")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    with ExitStack() as stack:
        server = stack.enter_context(postgres_server())
        running = []
        for name in args.checkouts:
            tree = Path(name.removeprefix("sqlite:")).resolve()
            home = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "home"
            if name.startswith("sqlite:"):
                configure(home, {}, "memory")
            else:
                configure(home, {"url": stack.enter_context(fresh_database(server))}, "sessions")
            port = free_port()
            proc = subprocess.Popen(
                [sys.executable, "-m", "raven", "a2a", "serve", "--port", str(port)],
                env={**os.environ, "RAVEN_HOME": str(home), "PYTHONPATH": str(tree)},
                cwd=tree,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            stack.callback(proc.wait, 20)
            stack.callback(proc.terminate)
            wait_listening(port)
            url = f"http://127.0.0.1:{port}/a2a"
            asyncio.run(load(url, 4, 2.0))  # warm up: pools, statement caches
            running.append((name, proc, url))
        results: dict[str, list[tuple[float, float, float]]] = {n: [] for n, _, _ in running}
        for _ in range(args.rounds):
            for name, proc, url in running:
                before = cpu_s(proc.pid)
                rate, p50, _, _ = asyncio.run(load(url, args.clients, args.seconds))
                cpu = (cpu_s(proc.pid) - before) * 1000 / max(1.0, rate * args.seconds)
                results[name].append((rate, p50, cpu))
    print(f"{'checkout':40} {'req/s':>7} {'p50 ms':>7} {'cpu ms':>7}  rounds' req/s")
    for name, rounds in results.items():
        rate, p50, cpu = (statistics.median(r[i] for r in rounds) for i in range(3))
        each = " ".join(f"{r[0]:.0f}" for r in rounds)
        print(f"{name:40} {rate:7.0f} {p50:7.2f} {cpu:7.2f}  {each}")


if __name__ == "__main__":
    main()
