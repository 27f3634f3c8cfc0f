"""ACP over the network against stdio: one streamed turn over each transport, in
interleaved rounds, and the memory of idle connections.

Each round sends a prompt whose answer is WORDS words from the scripted model (one
`agent_message_chunk` update a word) over stdio (`raven acp`), over a WebSocket and
over Streamable HTTP (`raven acp --listen`), and times the first update after the
prompt and every update after it. Then the medians, each transport's updates per second
against stdio's (aim: within 1.5x), and the listening server's RSS before and after
100 idle WebSocket and 100 idle Streamable HTTP connections.

    uv run python bench/acp_remote.py [--rounds 7] [--words 2000]
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
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from frames import result_of

Frame = dict[str, Any]
INIT = {"protocolVersion": 1, "clientCapabilities": {}}
IDLE = 100


class Peer:
    """One ACP connection, raw: `send` a frame, `frames()` what comes back."""

    send: Callable[[Frame], Awaitable[None]]
    frames: Callable[[], AsyncIterator[Frame]]

    async def call(self, request_id: int, method: str, params: Frame) -> Any:
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        async for msg in self.frames():
            if msg.get("id") == request_id and "method" not in msg:
                return result_of(msg, method)
        raise ConnectionError(f"{method}: the connection ended")

    async def turn(self, request_id: int, sid: str) -> tuple[float, list[float]]:
        """The ms to the first update and the gaps between the updates after it."""
        prompt = [{"type": "text", "text": "stream"}]
        params = {"sessionId": sid, "prompt": prompt}
        start = time.perf_counter()
        await self.send(
            {"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": params}
        )
        times: list[float] = []
        async for msg in self.frames():
            if msg.get("method") == "session/update":
                if msg["params"]["update"]["sessionUpdate"] == "agent_message_chunk":
                    times.append(time.perf_counter())
            elif msg.get("id") == request_id:
                result_of(msg, "session/prompt")
                break
        first = (times[0] - start) * 1000
        return first, [(b - a) * 1000 for a, b in itertools.pairwise(times)]


class Stdio(Peer):
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

        async def send(frame: Frame) -> None:
            proc.stdin.write(json.dumps(frame).encode() + b"\n")  # type: ignore[union-attr]

        async def frames() -> AsyncIterator[Frame]:
            while line := await proc.stdout.readline():  # type: ignore[union-attr]
                yield json.loads(line)

        self.send, self.frames = send, frames


class Socket(Peer):
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async def send(frame: Frame) -> None:
            await ws.send_str(json.dumps(frame))

        async def frames() -> AsyncIterator[Frame]:
            async for message in ws:
                yield json.loads(message.data)

        self.send, self.frames = send, frames


class Streamed(Peer):
    """Streamable HTTP: POSTs in, the connection's and the session's event streams out,
    merged in arrival order."""

    def __init__(self, http: aiohttp.ClientSession, url: str, connection_id: str) -> None:
        self.http, self.url = http, url
        self.headers = {"Acp-Connection-Id": connection_id}
        self.inbox: asyncio.Queue[Frame] = asyncio.Queue()
        self.readers = [asyncio.create_task(self._read(None))]

    async def _read(self, session_id: str | None) -> None:
        headers = {**self.headers, "Accept": "text/event-stream"}
        if session_id is not None:
            headers["Acp-Session-Id"] = session_id
        async with self.http.get(self.url, headers=headers) as response:
            async for line in response.content:
                if line.startswith(b"data: "):
                    self.inbox.put_nowait(json.loads(line[6:]))

    async def send(self, frame: Frame) -> None:  # type: ignore[override]
        headers = dict(self.headers)
        params = frame.get("params", {})
        if frame.get("method") == "session/prompt":
            headers["Acp-Session-Id"] = params["sessionId"]
        async with self.http.post(self.url, json=frame, headers=headers) as response:
            assert response.status == 202, await response.text()

    async def frames(self) -> AsyncIterator[Frame]:  # type: ignore[override]
        while True:
            msg = await self.inbox.get()
            result = msg.get("result")
            if isinstance(result, dict) and "sessionId" in result:
                self.readers.append(asyncio.create_task(self._read(result["sessionId"])))
            yield msg

    async def close(self) -> None:
        for reader in self.readers:
            reader.cancel()
        async with self.http.delete(self.url, headers=self.headers):
            pass


async def streamed(http: aiohttp.ClientSession, url: str) -> Streamed:
    frame = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}
    async with http.post(url, json=frame) as response:
        result_of(await response.json(), "initialize")
        return Streamed(http, url, response.headers["Acp-Connection-Id"])


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def token_of(env: dict[str, str]) -> str:
    command = [sys.executable, "-m", "raven", "acp", "token"]
    return subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--words", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        answer = " ".join(f"w{i}" for i in range(args.words))
        steps = [{"text": answer}] * (4 * (args.rounds + 1))
        Path(home, "script.json").write_text(json.dumps(steps))
        model = {"id": "s", "provider": "scripted", "script": "script.json"}
        Path(home, "config.json").write_text(json.dumps({"models": [model]}))
        env = {**os.environ, "RAVEN_HOME": home}
        listen = subprocess.Popen(
            [sys.executable, "-m", "raven", "acp", "--listen", "0"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert listen.stdout is not None
            url = listen.stdout.readline().split()[1]
            token = token_of(env).strip()
            auth = {"Authorization": f"Bearer {token}"}
            async with aiohttp.ClientSession(headers=auth) as http:
                await measure(env, home, http, url, args.rounds)
                await idle_memory(http, url, listen.pid)
        finally:
            listen.terminate()
            listen.wait(30)


async def measure(
    env: dict[str, str], home: str, http: aiohttp.ClientSession, url: str, rounds: int
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "raven",
        "acp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        limit=1 << 24,
    )
    peers: dict[str, Peer] = {
        "stdio": Stdio(proc),
        "WebSocket": Socket(await http.ws_connect("ws" + url.removeprefix("http"))),
        "Streamable HTTP": await streamed(http, url),
    }
    sids: dict[str, str] = {}
    for name, peer in peers.items():
        if name != "Streamable HTTP":
            await peer.call(0, "initialize", INIT)
        sids[name] = (await peer.call(1, "session/new", {"cwd": home, "mcpServers": []}))[
            "sessionId"
        ]
    firsts: dict[str, list[float]] = {name: [] for name in peers}
    rates: dict[str, list[float]] = {name: [] for name in peers}
    gaps: dict[str, list[float]] = {name: [] for name in peers}
    for round_ in range(rounds + 1):  # the first round warms up and is not counted
        for name, peer in peers.items():
            first, between = await peer.turn(10 + round_, sids[name])
            if round_:
                firsts[name].append(first)
                gaps[name].append(statistics.median(between))
                rates[name].append(len(between) / (sum(between) / 1000))
    print(f"{'transport':16} {'first update ms':>16} {'gap ms (median)':>16} {'updates/s':>10}")
    stdio_rate = statistics.median(rates["stdio"])
    for name in peers:
        rate = statistics.median(rates[name])
        print(
            f"{name:16} {statistics.median(firsts[name]):16.2f} "
            f"{statistics.median(gaps[name]):16.3f} {rate:10.0f}"
            f"   ({stdio_rate / rate:.2f}x stdio's time an update; aim <= 1.5x)"
        )
    spread = {n: (min(r), max(r)) for n, r in rates.items()}
    print("updates/s spread over rounds:", {n: f"{a:.0f}-{b:.0f}" for n, (a, b) in spread.items()})
    proc.stdin.close()  # type: ignore[union-attr]
    await proc.wait()
    await peers["Streamable HTTP"].close()  # type: ignore[attr-defined]


async def idle_memory(http: aiohttp.ClientSession, url: str, pid: int) -> None:
    before = rss_mib(pid)
    sockets = []
    for _ in range(IDLE // 2):
        ws = await http.ws_connect("ws" + url.removeprefix("http"))
        await Socket(ws).call(0, "initialize", INIT)
        sockets.append(ws)
    held = [await streamed(http, url) for _ in range(IDLE // 2)]
    after = rss_mib(pid)
    print(
        f"listening server RSS: {before:.1f} MiB, {after:.1f} MiB with {IDLE // 2} idle "
        f"WebSocket and {IDLE // 2} idle Streamable HTTP connections "
        f"({(after - before) * 1024 / IDLE:.0f} KiB each)"
    )
    for ws in sockets:
        await ws.close()
    for one in held:
        await one.close()


if __name__ == "__main__":
    asyncio.run(main())
