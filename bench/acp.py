"""ACP latency: spawn → initialize answered, session/new, and a prompt round trip.

`raven acp` with the echo model next to a minimal agent built on the official
ACP SDK (bench/floor/sdk_echo_agent.py) and `python -c pass`, measured in the same
run by the same driver; then the ratios the start-up aims are written in, and the
peak RSS of each agent after initialize and after its first echo turn.

    uv run python bench/acp.py [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from frames import result_of

HERE = Path(__file__).parent


Sample = tuple[float, float, float, float, float]


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def one_run(argv: list[str], env: dict[str, str], cwd: str) -> Sample:
    """(spawn→initialize, session/new, prompt round trip) in ms, and peak RSS in MiB after
    initialize and after the prompt."""
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None

    async def call(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        proc.stdin.write(json.dumps(frame).encode() + b"\n")  # type: ignore[union-attr]
        while True:
            msg = json.loads(await proc.stdout.readline())  # type: ignore[union-attr]
            if msg.get("id") == request_id and "method" not in msg:
                return msg

    await call(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    t_init = time.perf_counter()
    rss_init = peak_rss_mib(proc.pid)
    new = await call(1, "session/new", {"cwd": cwd, "mcpServers": []})
    t_new = time.perf_counter()
    sid = result_of(new, "session/new")["sessionId"]
    prompt = [{"type": "text", "text": "hello from the benchmark"}]
    result_of(await call(2, "session/prompt", {"sessionId": sid, "prompt": prompt}), "prompt")
    t_prompt = time.perf_counter()
    rss_turn = peak_rss_mib(proc.pid)
    proc.stdin.close()
    await proc.wait()
    return (
        (t_init - start) * 1000,
        (t_new - t_init) * 1000,
        (t_prompt - t_new) * 1000,
        rss_init,
        rss_turn,
    )


async def python_floor(env: dict[str, str], runs: int) -> float:
    """Median ms of `python -c pass`."""
    walls = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass", env=env)
        await proc.wait()
        walls.append((time.perf_counter() - start) * 1000)
    return statistics.median(walls)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as home:
        Path(home, "config.json").write_text('{"defaultModel": "echo"}')
        env = {**os.environ, "RAVEN_HOME": home}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        agents = {
            "raven acp": [sys.executable, "-m", "raven", "acp"],
            "ACP SDK echo agent": [sys.executable, str(HERE / "floor" / "sdk_echo_agent.py")],
        }
        header = f"{'agent':22} {'initialize ms':>14} {'session/new ms':>15} {'prompt ms':>10}"
        print(header + f" {'RSS init MiB':>13} {'RSS turn MiB':>13}")
        medians: dict[str, list[float]] = {}
        for name, argv in agents.items():
            await one_run(argv, env, home)
            samples = [await one_run(argv, env, home) for _ in range(runs)]
            medians[name] = [statistics.median(s[i] for s in samples) for i in range(5)]
            m = medians[name]
            print(f"{name:22} {m[0]:14.0f} {m[1]:15.1f} {m[2]:10.1f} {m[3]:13.1f} {m[4]:13.1f}")
        floor = await python_floor(env, runs)
        raven, sdk = medians["raven acp"], medians["ACP SDK echo agent"]
        print(f"python -c pass {floor:.0f} ms")
        print(f"initialize: {raven[0] / sdk[0]:.2f}x the SDK agent (aim <= 0.15x), ", end="")
        print(f"{raven[0] / floor:.1f}x python -c pass (aim <= 8x)")
        new_ratio = (raven[0] + raven[1]) / (sdk[0] + sdk[1])
        print(f"spawn -> session/new: {new_ratio:.2f}x the SDK agent (aim <= 0.3x)")
        print(f"peak RSS after initialize: {raven[3]:.1f} MiB (aim < 40)")


if __name__ == "__main__":
    asyncio.run(main())
