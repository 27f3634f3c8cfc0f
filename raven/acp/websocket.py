"""The ACP face over a WebSocket, as the ACP transport RFD's WebSocket binding has it: each
text message is one JSON-RPC frame, and one socket is one ACP connection, served by its own
`AcpServer` on a runtime it shares with the rest of the process (the gateway's).

Never admits a socket itself (the gateway checks the token, Host and Origin before the
upgrade) and never closes the runtime. Binary messages are refused with a close; every
frame sent passes through redaction, as on stdio.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import WSMsgType, web

from raven.acp.server import AcpServer
from raven.jsonrpc import Connection, FrameReader
from raven.redact import redact_json

if TYPE_CHECKING:
    from raven.engine import Runtime

log = logging.getLogger(__name__)

FINISH_S = 3.0
"""How long a closed socket's running requests get before they are cancelled."""
CLOSE_UNSUPPORTED = 1003


def acp_socket(runtime: Runtime) -> Callable[[web.WebSocketResponse], Awaitable[None]]:
    """Serve ACP on each admitted socket over `runtime`, until the socket closes; the
    connection's running turns are cancelled then (a reconnecting editor loads the
    session again: its transcript is stored)."""

    async def serve(ws: web.WebSocketResponse) -> None:
        reader = asyncio.StreamReader()
        server = AcpServer(lambda: runtime, owns_runtime=False)

        async def write(frame: bytes) -> None:
            if not ws.closed:
                await ws.send_str(frame.decode().rstrip("\n"))

        connection = Connection(FrameReader(reader), write, server, outbound=redact_json)
        server.attach(connection)
        serving = asyncio.create_task(connection.serve())
        log.info("an ACP client connected over WebSocket")
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    # One frame a line: a frame's own line ends are whitespace in JSON.
                    text = message.data.replace("\r", " ").replace("\n", " ")
                    reader.feed_data(text.encode() + b"\n")
                elif message.type == WSMsgType.BINARY:
                    await ws.close(code=CLOSE_UNSUPPORTED, message=b"ACP frames are text")
                    break
        finally:
            reader.feed_eof()
            await server.shutdown()
            await asyncio.wait([serving], timeout=FINISH_S)
            await connection.finish(FINISH_S)
            await server.aclose()
            log.info("an ACP client over WebSocket left")

    return serve
