"""Gateway latency and fan-out: a turn's round trip over Raven RPC, and events to many UIs.

`raven gateway` on the echo model, driven over real WebSockets on loopback: `turn.send`
to `TurnEnded` at 1 and 16 concurrent sessions (p50/p99), then one session watched by
16 sockets (events delivered per second).

    uv run python bench/gateway.py [--turns 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from frames import ErrorFrame, result_of


class Ui:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = 0
        self.replies: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        self.ended = asyncio.Event()
        self.events = 0
        self.reader = asyncio.create_task(self.read())

    async def read(self) -> None:
        async for message in self.ws:
            frame = json.loads(message.data)
            if frame.get("method") == "session.event":
                self.events += 1
                if frame["params"]["event"]["type"] == "TurnEnded":
                    self.ended.set()
            elif "id" in frame and frame["id"] in self.replies:
                method, reply = self.replies.pop(frame["id"])
                try:
                    reply.set_result(result_of(frame, method))
                except ErrorFrame as exc:
                    reply.set_exception(exc)

    async def call(self, method: str, **params: Any) -> Any:
        self.ids += 1
        future = asyncio.get_running_loop().create_future()
        self.replies[self.ids] = (method, future)
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}
        await self.ws.send_str(json.dumps(body))
        return await asyncio.wait_for(future, 30)

    async def turn(self, session_id: str) -> float:
        self.ended.clear()
        start = time.perf_counter()
        await self.call("turn.send", sessionId=session_id, text="hello from the benchmark")
        await asyncio.wait_for(self.ended.wait(), 30)
        return (time.perf_counter() - start) * 1000


def start_gateway(home: str) -> tuple[subprocess.Popen[str], str, dict[str, str]]:
    """`raven gateway` on a free port with `home` as its RAVEN_HOME, once it listens: the
    process, its Raven RPC URL and the headers that let a UI in."""
    env = {**os.environ, "RAVEN_HOME": home}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "raven", "gateway", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    token = Path(home, "gateway.token").read_text().strip()
    return proc, f"ws://127.0.0.1:{port}/rpc", {"Authorization": f"Bearer {token}"}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=50)
    turns = parser.parse_args().turns
    with tempfile.TemporaryDirectory() as home:
        Path(home, "config.json").write_text('{"defaultModel": "echo"}')
        proc, url, headers = start_gateway(home)
        try:
            async with aiohttp.ClientSession() as http:
                for sessions in (1, 16):
                    uis = [Ui(await http.ws_connect(url, headers=headers)) for _ in range(sessions)]
                    ids = [(await u.call("session.create", cwd=home))["sessionId"] for u in uis]
                    await asyncio.gather(*(u.turn(s) for u, s in zip(uis, ids, strict=True)))
                    samples: list[float] = []
                    for _ in range(max(1, turns // sessions)):
                        samples += await asyncio.gather(
                            *(u.turn(s) for u, s in zip(uis, ids, strict=True))
                        )
                    samples.sort()
                    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
                    print(
                        f"turn round trip, {sessions:2} sessions: "
                        f"p50 {statistics.median(samples):6.1f} ms  p99 {p99:6.1f} ms"
                    )
                    for u in uis:
                        await u.ws.close()
                watchers = [Ui(await http.ws_connect(url, headers=headers)) for _ in range(16)]
                sid = (await watchers[0].call("session.create", cwd=home))["sessionId"]
                for w in watchers[1:]:
                    await w.call("session.subscribe", sessionId=sid)
                start = time.perf_counter()
                for _ in range(turns):
                    for w in watchers:
                        w.ended.clear()
                    await watchers[0].call("turn.send", sessionId=sid, text="fan " * 50)
                    await asyncio.gather(*(w.ended.wait() for w in watchers))
                elapsed = time.perf_counter() - start
                delivered = sum(w.events for w in watchers)
                print(
                    f"events to 16 watchers of one session: {delivered / elapsed:8.0f} per second"
                )
                for w in watchers:
                    await w.ws.close()
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    asyncio.run(main())
