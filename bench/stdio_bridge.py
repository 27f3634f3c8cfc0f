"""An HTTP front for `raven a2a stdio`, so that a client that speaks only HTTP (the A2A
conformance kit) drives Raven over its pipes: the card at the well-known path (Raven's,
answered in-band, with one JSON-RPC interface here), and each JSON-RPC POST to `/a2a`
written to Raven's stdin as a frame (its A2A-Version header as `serviceParams`, under an
id of the bridge's own), its answer the response, a streaming method's frames as
server-sent events until `streamEnd`. The bridge adds no check of its own: what the kit
sees is what Raven answered over stdio.

    uv run python bench/stdio_bridge.py PORT   # with RAVEN_HOME naming Raven's config
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from raven.jsonrpc.headed import read_frame

STREAMING = ("SendStreamingMessage", "SubscribeToTask")
DEADLINE_S = 120.0


class Pipes:
    """`raven a2a stdio`, its frames by id."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._answers: dict[Any, asyncio.Queue[dict[str, Any]]] = {}
        self._unnamed: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.hello: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._writing = asyncio.Lock()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls) -> Pipes:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "raven",
            "a2a",
            "stdio",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024,
        )
        pipes = cls(proc)
        await asyncio.wait_for(pipes.hello, DEADLINE_S)
        return pipes

    async def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while (frame := await read_frame(out, 64 * 1024 * 1024)) is not None:
            body = json.loads(frame)
            if body.get("type") == "handshake":
                self.hello.set_result(body)
            elif body.get("id") in self._answers:
                self._answers[body["id"]].put_nowait(body)
            elif body.get("id") is None:
                self._unnamed.put_nowait(body)

    async def send(self, body: bytes) -> None:
        assert self.proc.stdin is not None
        async with self._writing:
            self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            await self.proc.stdin.drain()

    def expect(self, request_id: Any) -> asyncio.Queue[dict[str, Any]]:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._answers[request_id] = queue
        return queue

    def done(self, request_id: Any) -> None:
        self._answers.pop(request_id, None)

    async def unnamed(self) -> dict[str, Any]:
        """The next answer with id null (to a frame Raven could not read)."""
        return await asyncio.wait_for(self._unnamed.get(), DEADLINE_S)


def bridge(pipes: Pipes, port: int) -> web.Application:
    ids = itertools.count(1)

    async def card(_: web.Request) -> web.Response:
        own = f"bridge-{next(ids)}"
        answers = pipes.expect(own)
        try:
            ask = {"jsonrpc": "2.0", "id": own, "method": "GetExtendedAgentCard"}
            await pipes.send(json.dumps(ask).encode())
            found = (await asyncio.wait_for(answers.get(), DEADLINE_S))["result"]
        finally:
            pipes.done(own)
        url = f"http://127.0.0.1:{port}/a2a"
        found["supportedInterfaces"] = [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ]
        return web.json_response(found)

    async def rpc(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            message = json.loads(raw)
        except ValueError:
            message = None
        if not isinstance(message, dict) or "id" not in message:
            await pipes.send(raw)  # as sent: Raven answers it (id null) or not at all
            if isinstance(message, dict) and "method" in message:
                return web.Response(status=204)  # a notification
            return web.json_response(await pipes.unnamed())
        theirs, own = message["id"], f"bridge-{next(ids)}"
        version = request.headers.get("A2A-Version") or "0.3"  # as HTTP reads its absence
        message = {**message, "id": own, "serviceParams": {"a2a-version": version}}
        answers = pipes.expect(own)
        try:
            await pipes.send(json.dumps(message).encode())
            first = await asyncio.wait_for(answers.get(), DEADLINE_S)
            if message.get("method") not in STREAMING or "error" in first:
                return web.json_response({**first, "id": theirs})
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            async for event in _rest(first, answers):
                data = json.dumps({**event, "id": theirs}).encode()
                await response.write(b"data: " + data + b"\n\n")
            await response.write_eof()
            return response
        finally:
            pipes.done(own)

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_get("/.well-known/agent-card.json", card)
    app.router.add_post("/a2a", rpc)
    app.router.add_post("/a2a/", rpc)  # where a client given the URL as a base posts
    return app


async def _rest(
    first: dict[str, Any], answers: asyncio.Queue[dict[str, Any]]
) -> AsyncIterator[dict[str, Any]]:
    event = first
    while not event.get("streamEnd"):
        yield event
        if "error" in event:
            return
        event = await asyncio.wait_for(answers.get(), DEADLINE_S)


async def serve(port: int) -> None:
    pipes = await Pipes.start()
    runner = web.AppRunner(bridge(pipes, port), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print(f"rpc: http://127.0.0.1:{port}/a2a (raven a2a stdio, pid {pipes.proc.pid})", flush=True)
    try:
        await pipes.proc.wait()
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    asyncio.run(serve(int(sys.argv[1])))
