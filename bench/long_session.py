"""Long sessions: a turn, a session/load and a live session's memory at 100 and at 10,000
stored messages, through `raven acp` as an editor drives it.

Each session is written to a fresh SQLite store first, as Raven leaves one: the short one
(100 messages) whole; the long one (10,000) with a compaction near its end, as a session
that grew that long under a model window has (`raven.engine.compaction`): the model sees
its summary and the newest 40 messages. Then, per round and per length, interleaved:

- **turn**: a fresh `raven acp` (offline echo model) resumes the session and sends
  `--turns` prompts; the median round trip of those after the first;
- **memory**: that process's resident memory after the prompts;
- **load**: a warm `raven acp` (one session already served) answers `session/load` of
  the stored session, replay included.

The ratios (10,000 / 100) are the aims of the long-sessions issue: turn within 1.3x,
load within 1.5x, memory within 10 MiB.

    uv run python bench/long_session.py [--rounds 5] [--turns 30]
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

from raven.messages import AssistantMessage, CompactionMessage, user_text
from raven.sessions import SqliteStore

LENGTHS = (100, 10_000)
KEPT = 40
"""Messages after the long session's compaction's kept part begins."""


def build(home: Path, cwd: Path, length: int) -> str:
    """A stored session of `length` messages (a compaction near the end of a long one)."""
    store = SqliteStore(home / "data" / "raven.db")
    try:
        record = store.create(str(cwd), "acp", None, "echo")
        for n in range(length):
            said = f"message {n}: " + "words of a long working session " * 3
            message = user_text(said) if n % 2 == 0 else AssistantMessage(text=said)
            store.append(record.id, message)
            if length > 1_000 and n == length - KEPT // 2:
                summary = "The user and Raven worked through many steps. " * 20
                store.append(
                    record.id,
                    CompactionMessage(id="cmp_bench", summary=summary, kept_from=length - KEPT),
                )
    finally:
        store.close()
    return record.id


class Acp:
    """A `raven acp` driven over its pipes, as an editor does."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._ids = 0

    @classmethod
    async def start(cls, env: dict[str, str]) -> Acp:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "raven",
            "acp",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
        )
        acp = cls(proc)
        await acp.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        return acp

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._ids += 1
        frame = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(frame).encode() + b"\n")
        while True:
            msg = json.loads(await self.proc.stdout.readline())
            if msg.get("id") == self._ids and "method" not in msg:
                return result_of(msg, method)

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    async def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        await self.proc.wait()


async def turns(env: dict[str, str], cwd: Path, session_id: str, count: int) -> tuple[float, float]:
    """The median prompt round trip (ms, after the first) and the RSS after, in MiB."""
    acp = await Acp.start(env)
    try:
        await acp.call("session/resume", {"sessionId": session_id, "cwd": str(cwd)})
        took = []
        for n in range(count):
            prompt = [{"type": "text", "text": f"go on with step {n}"}]
            start = time.perf_counter()
            await acp.call("session/prompt", {"sessionId": session_id, "prompt": prompt})
            took.append((time.perf_counter() - start) * 1000)
        return statistics.median(took[1:]), acp.rss_mib()
    finally:
        await acp.stop()


async def load(env: dict[str, str], cwd: Path, session_id: str) -> float:
    """session/load of the stored session in a warm process, in ms."""
    acp = await Acp.start(env)
    try:
        warm = await acp.call("session/new", {"cwd": str(cwd), "mcpServers": []})
        prompt = [{"type": "text", "text": "warm up"}]
        await acp.call("session/prompt", {"sessionId": warm["sessionId"], "prompt": prompt})
        start = time.perf_counter()
        params = {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}
        await acp.call("session/load", params)
        return (time.perf_counter() - start) * 1000
    finally:
        await acp.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        results: dict[int, dict[str, list[float]]] = {}
        homes: dict[int, tuple[dict[str, str], Path, str]] = {}
        for length in LENGTHS:
            home, cwd = root / f"home{length}", root / f"work{length}"
            cwd.mkdir(parents=True)
            (home / "data").mkdir(parents=True)
            echo = {"id": "echo", "provider": "scripted", "contextWindow": 32_000}
            (home / "config.json").write_text(json.dumps({"models": [echo]}))
            env = {**os.environ, "RAVEN_HOME": str(home)}
            homes[length] = (env, cwd, build(home, cwd, length))
            results[length] = {"turn": [], "memory": [], "load": []}
        for _ in range(args.rounds):
            for length in LENGTHS:  # interleaved: the host's drift touches both alike
                env, cwd, session_id = homes[length]
                turn, memory = await turns(env, cwd, session_id, args.turns)
                results[length]["turn"].append(turn)
                results[length]["memory"].append(memory)
                results[length]["load"].append(await load(env, cwd, session_id))
    print(f"{'':>10} {'turn p50 ms':>12} {'load ms':>9} {'RSS MiB':>8}")
    medians = {}
    for length in LENGTHS:
        row = {k: statistics.median(v) for k, v in results[length].items()}
        medians[length] = row
        print(f"{length:>10,} {row['turn']:>12.2f} {row['load']:>9.2f} {row['memory']:>8.1f}")
    short, long = medians[LENGTHS[0]], medians[LENGTHS[1]]
    print(
        f"10,000 / 100: turn {long['turn'] / short['turn']:.2f}x (aim 1.3x), "
        f"load {long['load'] / short['load']:.2f}x (aim 1.5x), "
        f"memory {long['memory'] - short['memory']:+.1f} MiB (aim within 10)"
    )
    for length in LENGTHS:
        spread = {k: f"{min(v):.1f}-{max(v):.1f}" for k, v in results[length].items()}
        print(f"spread at {length:,}: {spread}")


if __name__ == "__main__":
    asyncio.run(main())
