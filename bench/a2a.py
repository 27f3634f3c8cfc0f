"""A2A SendMessage throughput and latency at 1, 8 and 32 concurrent clients.

`raven a2a serve` (echo model, tasks stored in the session store as usual) next to
the a2a-sdk's own Starlette application serving an equivalent echo executor, and
a bare aiohttp handler showing what the load client itself can drive (one client,
`loadgen.load`, drives every run). Besides requests a second, each server's own
CPU time per request (user and system, all its threads, from /proc): the client's share
of a round trip is the same for every server, so at 1 client the rates' ratio is
smaller than the servers' own costs' ratio. And how often each server slept (its
threads' voluntary context switches per request): at 1 client the SDK's server is
never idle between requests, Raven's is (docs/a2a.md tells what that does and does not
cost).

    uv run python bench/a2a.py [--seconds 5] [--rounds 3]
    uv run python bench/a2a.py --before 0ec75e5  # and Raven as it was at a commit, alike
    uv run python bench/a2a.py --memory 20000   # raven's RSS after 1,000, 10,000 and N tasks
    uv run python bench/a2a.py --placement split  # the load client on one CPU, servers on another

`--before` runs the `raven` package of that commit (`git archive`) in the same rounds,
with a home of its own, so a change's before and after meet the same stretch of the host.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import NamedTuple

from loadgen import TOKEN, cpu_s, free_port, load, wait_listening

HERE = Path(__file__).parent
LEVELS = (1, 8, 32)
RAVEN, SDK = "raven a2a serve", "a2a-sdk Starlette"


class Server(NamedTuple):
    argv: list[str]
    port: int
    cwd: str | None = None
    """Where it starts: `python -m raven` imports the `raven` found there first."""
    home: str | None = None
    """Its RAVEN_HOME, when not the benchmark's."""


def raven(port: int, cwd: str | None = None, home: str | None = None) -> Server:
    return Server(
        [sys.executable, "-m", "raven", "a2a", "serve", "--port", str(port)], port, cwd, home
    )


def servers(home: str) -> dict[str, Server]:
    sdk_port, bare_port = free_port(), free_port()
    return {
        RAVEN: raven(free_port()),
        SDK: Server(
            [sys.executable, str(HERE / "floor" / "sdk_a2a_echo.py"), str(sdk_port)], sdk_port
        ),
        "bare aiohttp handler": Server(
            [sys.executable, str(HERE / "floor" / "bare_aiohttp.py"), str(bare_port)], bare_port
        ),
    }


def raven_at(rev: str, stack: ExitStack, config: str) -> Server:
    """`raven a2a serve` from the `raven` package of commit `rev`, with a home of its own."""
    code = stack.enter_context(tempfile.TemporaryDirectory())
    home = stack.enter_context(tempfile.TemporaryDirectory())
    tree = subprocess.run(
        ["git", "-C", str(HERE.parent), "archive", rev, "raven"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", code], input=tree, check=True)
    config_file = Path(home, "config.json")
    config_file.write_text(config)
    config_file.chmod(0o600)
    return raven(free_port(), cwd=code, home=home)


def sleeps(pid: int) -> int:
    """How often `pid`'s threads have waited for something so far (voluntary context
    switches)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        line = next(x for x in status.splitlines() if x.startswith("voluntary_ctxt_switches:"))
        total += int(line.split()[1])
    return total


def placement(kind: str) -> tuple[set[int] | None, set[int] | None]:
    """The CPUs of (the load client, the servers): `free` leaves both to the scheduler;
    `split` gives the client one CPU and the servers another; `shared` gives all one."""
    if kind == "free":
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    if kind == "shared":
        return {cpus[0]}, {cpus[0]}
    if len(cpus) < 2:
        raise SystemExit("--placement split needs two CPUs")
    return {cpus[0]}, {cpus[1]}


def rss_mib(pid: int) -> tuple[float, float]:
    """(current, peak) resident set size of `pid`, MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    values = {
        line.split(":")[0]: int(line.split()[1]) / 1024
        for line in status.splitlines()
        if line.startswith(("VmRSS", "VmHWM"))
    }
    return values["VmRSS"], values["VmHWM"]


async def memory(home: str, env: dict[str, str], tasks: int) -> None:
    """Raven's RSS after a warm-up of 1,000 tasks, after 10,000 (the memory task store's
    default `keepFinishedTasks`: from there it forgets the oldest) and after `tasks`."""
    server = servers(home)[RAVEN]
    proc = subprocess.Popen(
        server.argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_listening(server.port)
        url = f"http://127.0.0.1:{server.port}/a2a"
        done, marks, errors, began = 0, [], 0, time.perf_counter()
        for mark in sorted({1000, min(10_000, tasks), tasks}):
            _, _, _, failed = await load(url, 8, float("inf"), total=mark - done)
            errors, done = errors + failed, mark
            marks.append((mark, rss_mib(proc.pid)))
        rate = done / (time.perf_counter() - began)
        store = sum(f.stat().st_size for f in Path(home, "data").glob("raven.db*")) / 2**20
        print(f"tasks {tasks} at {rate:.0f} req/s, {errors} errors")
        for mark, (rss, peak) in marks:
            print(f"RSS after {mark:>6,} tasks: {rss:.1f} MiB (peak {peak:.1f})")
        for (a, (ra, _)), (b, (rb, _)) in itertools.pairwise(marks):
            print(f"growth per task from {a:,} to {b:,}: {(rb - ra) * 1024 / (b - a):.2f} KiB")
        print(f"session store on disk: {store:.1f} MiB")
    finally:
        proc.terminate()
        proc.wait(15)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--memory", type=int, metavar="TASKS", help="measure RSS instead")
    parser.add_argument("--task-store", default="memory", help="a2a.server.taskStore")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per level, taking turns")
    parser.add_argument("--before", metavar="REV", help="also Raven as it was at commit REV")
    parser.add_argument("--placement", choices=("free", "split", "shared"), default="free")
    args = parser.parse_args()
    seconds = args.seconds
    config = json.dumps(
        {
            "defaultModel": "echo",
            "a2a": {
                "server": {
                    "token": TOKEN,
                    "maxConcurrentTasks": 64,
                    "taskStore": args.task_store,
                }
            },
        }
    )
    with tempfile.TemporaryDirectory() as home, ExitStack() as stack:
        Path(home, "config.json").write_text(config)
        Path(home, "config.json").chmod(0o600)
        env = {**os.environ, "RAVEN_HOME": home}
        if args.memory:
            await memory(home, env, args.memory)
            return
        listed = servers(home)
        if args.before:
            listed = {f"raven at {args.before}": raven_at(args.before, stack, config), **listed}
        client_cpus, server_cpus = placement(args.placement)
        if client_cpus is not None:
            os.sched_setaffinity(0, client_cpus)
        await compare(listed, env, seconds, args.rounds, server_cpus)


async def compare(
    listed: dict[str, Server],
    env: dict[str, str],
    seconds: float,
    rounds: int,
    cpus: set[int] | None = None,
) -> None:
    """Every server up at once (on `cpus`, if given); at each level, `rounds` rounds taking
    turns, so a slower stretch of a shared machine falls on all of them alike. Medians per
    server, and the median of each round's ratio to the SDK (of every Raven), of rates and
    of CPU time per request."""
    procs = {
        name: subprocess.Popen(
            server.argv,
            env={**env, "RAVEN_HOME": server.home} if server.home else env,
            cwd=server.cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # In the child before it runs: every thread it starts inherits the CPUs.
            preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
        )
        for name, server in listed.items()
    }
    ravens = [name for name in listed if name.startswith("raven")]
    try:
        urls = {}
        for name, server in listed.items():
            wait_listening(server.port)
            urls[name] = f"http://127.0.0.1:{server.port}/a2a"
            await load(urls[name], 4, 1.0)
        columns = ("clients", 7), ("req/s", 8), ("p50 ms", 8), ("p99 ms", 8), ("errors", 7)
        head = " ".join(f"{title:>{width}}" for title, width in columns)
        print(f"{'server':22} {head} {'cpu us/req':>10} {'sleeps/req':>10}")
        ratios: dict[tuple[str, int], list[float]] = {}
        cpu_ratios: dict[tuple[str, int], list[float]] = {}
        for clients in LEVELS:
            runs: dict[str, list[tuple[float, float, float, int, float, float]]] = {
                n: [] for n in urls
            }
            for _ in range(rounds):
                for name, url in urls.items():
                    pid = procs[name].pid
                    before, slept = cpu_s(pid), sleeps(pid)
                    rate, p50, p99, errors = await load(url, clients, seconds)
                    used, slept = cpu_s(pid) - before, sleeps(pid) - slept
                    served = rate * seconds
                    runs[name].append((rate, p50, p99, errors, used / served * 1e6, slept / served))
                for name in ravens:
                    rate, sdk = runs[name][-1], runs[SDK][-1]
                    ratios.setdefault((name, clients), []).append(rate[0] / sdk[0])
                    cpu_ratios.setdefault((name, clients), []).append(sdk[4] / rate[4])
            for name, got in runs.items():
                rate, p50, p99, cpu, slept = (
                    statistics.median(r[i] for r in got) for i in (0, 1, 2, 4, 5)
                )
                errors = sum(r[3] for r in got)
                shown = f"{rate:8.0f} {p50:8.1f} {p99:8.1f} {errors:7} {cpu:10.0f} {slept:10.2f}"
                print(f"{name:22} {clients:7} {shown}")
        print()
        for (name, clients), got in ratios.items():
            shown = ", ".join(f"{r:.2f}" for r in got)
            print(f"{name} / sdk at {clients:2} clients: {statistics.median(got):.2f}× ({shown})")
        for (name, clients), got in cpu_ratios.items():
            shown = ", ".join(f"{r:.2f}" for r in got)
            print(
                f"server CPU per request, sdk / {name}, at {clients:2} clients: "
                f"{statistics.median(got):.2f}× ({shown})"
            )
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            proc.wait(15)


if __name__ == "__main__":
    asyncio.run(main())
