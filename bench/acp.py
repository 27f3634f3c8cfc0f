"""ACP latency: spawn → initialize answered, session/new, and a prompt round trip.

`raven acp` with the echo model next to a minimal agent built on the official
ACP SDK (bench/floor/sdk_echo_agent.py), measured in the same run by the same driver.

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

HERE = Path(__file__).parent


async def one_run(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, float]:
    """(spawn→initialize, session/new, prompt round trip) in milliseconds."""
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
    new = await call(1, "session/new", {"cwd": cwd, "mcpServers": []})
    t_new = time.perf_counter()
    sid = new["result"]["sessionId"]
    prompt = [{"type": "text", "text": "hello from the benchmark"}]
    await call(2, "session/prompt", {"sessionId": sid, "prompt": prompt})
    t_prompt = time.perf_counter()
    proc.stdin.close()
    await proc.wait()
    return ((t_init - start) * 1000, (t_new - t_init) * 1000, (t_prompt - t_new) * 1000)


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
        print(f"{'agent':22} {'initialize ms':>14} {'session/new ms':>15} {'prompt ms':>10}")
        for name, argv in agents.items():
            await one_run(argv, env, home)
            samples = [await one_run(argv, env, home) for _ in range(runs)]
            medians = [statistics.median(s[i] for s in samples) for i in range(3)]
            print(f"{name:22} {medians[0]:14.0f} {medians[1]:15.1f} {medians[2]:10.1f}")


if __name__ == "__main__":
    asyncio.run(main())
