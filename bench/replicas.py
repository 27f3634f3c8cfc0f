"""Replicas on PostgreSQL: A2A throughput with one, two and three `raven a2a serve` replicas
behind HAProxy, against one replica on SQLite; the latency PostgreSQL adds to a turn; and
how soon a UI on one gateway replica hears a turn running on another, with LISTEN/NOTIFY
and with polling; and how soon a cancel sent through one replica stops the turn running
on another.

Every replica runs the echo model (a real turn per task: a session, its transcript, its
log); with PostgreSQL, sessions and tasks both live in one throwaway database. Needs
Debian's postgresql and haproxy packages.

    uv run python bench/replicas.py [--seconds 5] [--rounds 3] [--follow-turns 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
from frames import result_of
from loadgen import TOKEN, cpu_s, free_port, load, wait_listening

sys.path.insert(0, str(Path(__file__).parent.parent))
from tests.e2e.topology import Replica, haproxy_config, require_haproxy
from tests.postgres import fresh_database, postgres_server
from tests.processes import ended, pid_from

LEVELS = (1, 8, 32)
LABEL_SQLITE, LABEL_ROWS = (
    "1 replica, SQLite, tasks in memory",
    "1 replica, SQLite, tasks in sessions",
)
GATEWAY_TOKEN = "bench-gateway-token-0123456789abcdefghijklmnopqrstuvwxyz"


def configure(home: Path, sessions: dict[str, Any], task_store: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    config = {
        "defaultModel": "echo",
        "sessions": sessions,
        "a2a": {"server": {"token": TOKEN, "maxConcurrentTasks": 64, "taskStore": task_store}},
    }
    (home / "config.json").write_text(json.dumps(config))
    (home / "config.json").chmod(0o600)
    (home / "gateway.token").write_text(GATEWAY_TOKEN + "\n")
    (home / "gateway.token").chmod(0o600)


@contextmanager
def servers(homes: list[Path], command: list[str]) -> Any:
    """One `raven COMMAND --port P` per home; yields the replicas."""
    replicas = [Replica(f"r{n}", home, free_port()) for n, home in enumerate(homes, start=1)]
    procs = []
    try:
        for replica in replicas:
            replica.proc = subprocess.Popen(
                [sys.executable, "-m", "raven", *command, "--port", str(replica.port)],
                env={**os.environ, "RAVEN_HOME": str(replica.home)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            procs.append(replica.proc)
            wait_listening(replica.port)
        yield replicas
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(20)


@contextmanager
def balancer(replicas: list[Replica], workdir: Path) -> Any:
    port = free_port()
    config = workdir / f"haproxy-{port}.cfg"
    config.write_text(haproxy_config(port, replicas, check="/.well-known/agent-card.json"))
    proc = subprocess.Popen(
        [require_haproxy(), "-db", "-f", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port)
        time.sleep(1.0)  # its first health checks find every replica up
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


async def throughput(
    url: str, seconds: float, rounds: int, replicas: list[Replica]
) -> dict[int, tuple[float, ...]]:
    """Per level: median (req/s, p50 ms, p99 ms) over `rounds`, errors, and the replicas'
    own CPU per request (ms, every thread of every replica)."""
    await load(url, 4, 3.0)  # warm up: connection pools, statement caches
    out = {}
    pids = [r.proc.pid for r in replicas if r.proc is not None]
    for clients in LEVELS:
        runs, cpu = [], []
        for _ in range(rounds):
            before = sum(cpu_s(pid) for pid in pids)
            runs.append(await load(url, clients, seconds))
            used = sum(cpu_s(pid) for pid in pids) - before
            cpu.append(used * 1000 / max(1.0, runs[-1][0] * seconds))
        rate, p50, p99 = (statistics.median(r[i] for r in runs) for i in range(3))
        out[clients] = (rate, p50, p99, sum(r[3] for r in runs), statistics.median(cpu))
    return out


async def a2a_section(root: Path, pg_server: str, seconds: float, rounds: int) -> None:
    results: dict[str, dict[int, tuple[float, ...]]] = {}
    for store in ("memory", "sessions"):
        home = root / f"sqlite-{store}"
        configure(home, {}, store)
        with servers([home], ["a2a", "serve"]) as (one,):
            label = LABEL_ROWS if store == "sessions" else LABEL_SQLITE
            results[label] = await throughput(
                f"http://127.0.0.1:{one.port}/a2a", seconds, rounds, [one]
            )
    with fresh_database(pg_server) as url:
        home = root / "pg-sessions"
        configure(home, {"url": url}, "memory")
        with servers([home], ["a2a", "serve"]) as (one,):
            results["1 replica, PostgreSQL sessions only"] = await throughput(
                f"http://127.0.0.1:{one.port}/a2a", seconds, rounds, [one]
            )
    for count in (1, 2, 3):
        with ExitStack() as stack:
            url = stack.enter_context(fresh_database(pg_server))
            homes = [root / f"pg{count}-{n}" for n in range(count)]
            for home in homes:
                configure(home, {"url": url}, "sessions")
            replicas = stack.enter_context(servers(homes, ["a2a", "serve"]))
            direct = f"http://127.0.0.1:{replicas[0].port}/a2a"
            if count == 1:
                results["1 replica, PostgreSQL"] = await throughput(
                    direct, seconds, rounds, replicas
                )
            front = stack.enter_context(balancer(replicas, root))
            label = f"{count} replica{'s' if count > 1 else ''}, PostgreSQL, HAProxy"
            results[label] = await throughput(front + "/a2a", seconds, rounds, replicas)
    head = f"{'clients':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'cpu ms':>7}"
    print(f"{'topology':38} {head}")
    for label, levels in results.items():
        for clients, (rate, p50, p99, errors, cpu) in levels.items():
            shown = f"{rate:8.0f} {p50:8.1f} {p99:8.1f} {errors:7.0f} {cpu:7.2f}"
            print(f"{label:38} {clients:7} {shown}")
    base = results["1 replica, SQLite, tasks in memory"][1][1]
    sessions = results["1 replica, PostgreSQL sessions only"][1][1]
    both = results["1 replica, PostgreSQL"][1][1]
    print()
    print(
        f"at 1 client, sessions in PostgreSQL add {sessions - base:.1f} ms to a turn "
        f"(p50 {sessions:.1f} against {base:.1f} ms on SQLite); A2A tasks in PostgreSQL "
        f"too, {both - base:.1f} ms (p50 {both:.1f} ms)"
    )
    rate = {label: levels[1][0] for label, levels in results.items()}
    one, two = (results[f"{n}, PostgreSQL, HAProxy"][32][0] for n in ("1 replica", "2 replicas"))
    print(
        f"at 1 client: PostgreSQL does {rate['1 replica, PostgreSQL'] / rate[LABEL_SQLITE]:.0%}"
        f" of SQLite's rate; tasks in SQLite {rate[LABEL_ROWS] / rate[LABEL_SQLITE]:.0%} of"
        f" tasks in memory. At 32 clients, 2 replicas do {two / one:.2f}x one's rate"
    )


async def follow_latency(root: Path, pg_server: str, turns: int, listen: bool) -> list[float]:
    """Seconds from a turn's answer reaching the UI on the replica running it to its
    reaching a UI on the other replica, for each of `turns` turns."""
    with fresh_database(pg_server) as url:
        homes = [root / f"follow-{listen}-{n}" for n in range(2)]
        for home in homes:
            configure(home, {"url": url, "listen": listen}, "memory")
        with servers(homes, ["gateway"]) as (a, b):
            async with aiohttp.ClientSession() as http:
                auth = {"Authorization": f"Bearer {GATEWAY_TOKEN}"}
                near = await http.ws_connect(f"ws://127.0.0.1:{a.port}/rpc", headers=auth)
                far = await http.ws_connect(f"ws://127.0.0.1:{b.port}/rpc", headers=auth)
                ids = iter(range(1, 1_000_000))

                async def call(ws: Any, method: str, **params: Any) -> Any:
                    n = next(ids)
                    await ws.send_json(
                        {"jsonrpc": "2.0", "id": n, "method": method, "params": params}
                    )
                    while True:
                        frame = json.loads((await ws.receive()).data)
                        if frame.get("id") == n:
                            return result_of(frame, method)

                async def answer_at(ws: Any) -> float:
                    while True:
                        frame = json.loads((await ws.receive()).data)
                        event = frame.get("params", {}).get("event", {})
                        if event.get("type") == "TurnEnded":
                            return time.perf_counter()

                sid = (await call(near, "session.create", cwd=str(root)))["sessionId"]
                await call(far, "session.subscribe", sessionId=sid)
                delays = []
                for n in range(turns):
                    await call(near, "turn.send", sessionId=sid, text=f"turn {n}")
                    here, there = await asyncio.gather(answer_at(near), answer_at(far))
                    delays.append(there - here)
                await near.close()
                await far.close()
    return delays


async def cancel_latency(root: Path, pg_server: str, tries: int) -> list[float]:
    """Seconds from a CancelTask sent through one replica to the end of the command the
    task's turn runs on the other (its process group killed), for each of `tries`."""
    with fresh_database(pg_server) as url:
        homes = [root / f"cancel-{n}" for n in range(2)]
        pidfile = root / "cancel.pid"
        command = {"command": f"echo $$ > {pidfile}; exec sleep 300"}
        script = [{"toolCalls": [{"name": "run_command", "arguments": command}]}] * tries
        for home in homes:
            configure(home, {"url": url}, "sessions")
            (home / "script.json").write_text(json.dumps(script))
            config = json.loads((home / "config.json").read_text())
            config["models"] = [{"id": "s", "provider": "scripted", "script": "script.json"}]
            config["defaultModel"] = "s"
            config["a2a"]["server"]["approvals"] = "auto"
            (home / "config.json").write_text(json.dumps(config))
        delays = []
        with servers(homes, ["a2a", "serve"]) as (a, b):
            headers = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}
            async with aiohttp.ClientSession(headers=headers) as http:

                async def call(replica: Replica, method: str, params: dict[str, Any]) -> Any:
                    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
                    url = f"http://127.0.0.1:{replica.port}/a2a"
                    async with http.post(url, json=body) as response:
                        return result_of(await response.json(), method)

                for n in range(tries):
                    pidfile.unlink(missing_ok=True)
                    message = {"messageId": f"c{n}", "role": "ROLE_USER", "parts": [{"text": "go"}]}
                    params = {"message": message, "configuration": {"returnImmediately": True}}
                    task = (await call(a, "SendMessage", params))["task"]
                    pid = await pid_from(pidfile)
                    start = time.perf_counter()
                    await call(b, "CancelTask", {"id": task["id"]})
                    if not await ended([pid], 10):
                        raise SystemExit("a cancel through another replica did not arrive")
                    delays.append(time.perf_counter() - start)
    return delays


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--follow-turns", type=int, default=30)
    parser.add_argument("--cancels", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, postgres_server() as pg_server:
        root = Path(tmp)
        await a2a_section(root, pg_server, args.seconds, args.rounds)
        print()
        for listen in (True, False):
            delays = await follow_latency(root, pg_server, args.follow_turns, listen)
            how = "LISTEN/NOTIFY" if listen else "polling every 0.25 s"
            ms = sorted(d * 1000 for d in delays)
            print(
                f"a turn's end on the other replica, {how}: median {statistics.median(ms):.1f} ms"
                f" later, worst {ms[-1]:.1f} ms ({len(ms)} turns)"
            )
        ms = sorted(d * 1000 for d in await cancel_latency(root, pg_server, args.cancels))
        print(
            f"a cancel through the other replica stops the turn's command: median"
            f" {statistics.median(ms):.1f} ms, worst {ms[-1]:.1f} ms ({len(ms)} cancels)"
        )


if __name__ == "__main__":
    asyncio.run(main())
