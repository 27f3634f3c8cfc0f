"""A Raven RPC client over the gateway's WebSocket, on Raven's shared JSON-RPC connection.

Every call sends params built from the contract's models and parses the answer with
them; every notification is parsed with its model and handed to one handler, in the
order the gateway sent them. Never retries and never follows a redirect; each call
has a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import aiohttp
from pydantic import ValidationError

from raven.errors import RavenError
from raven.jsonrpc import (
    MAX_FRAME_BYTES,
    METHOD_NOT_FOUND,
    Connection,
    ConnectionClosed,
    FrameReader,
    RpcError,
)
from raven.rpc import contract as c

CALL_TIMEOUT_S = 30.0
R = TypeVar("R", bound=c.Wire)

NoteHandler = Callable[[str, c.Wire], None]
"""Told each notification: its method and its params, parsed."""


class GatewayUnreachable(RavenError):
    """The gateway cannot be reached, refused the token, or went away."""


class Refused(RavenError):
    """The gateway answered a call with an error; `code` is the contract's (`c.Code`)."""

    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(f"{method}: {message}")
        self.code = code
        self.reason = message


class RpcClient:
    """One connection to a gateway; `connect` opens it."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, url: str, token: str, on_note: NoteHandler) -> AsyncIterator[RpcClient]:
        """Connect to the gateway at `url` (http[s]://host:port) with its token."""
        rpc_url = url.rstrip("/").replace("http", "ws", 1) + "/rpc"
        headers = {"Authorization": f"Bearer {token}"}
        async with aiohttp.ClientSession() as http:
            try:
                ws = await http.ws_connect(rpc_url, headers=headers, max_msg_size=MAX_FRAME_BYTES)
            except (aiohttp.ClientError, OSError) as exc:
                raise GatewayUnreachable(f"cannot reach the gateway at {url}: {exc}") from None
            stream = asyncio.StreamReader()

            async def write(data: bytes) -> None:
                await ws.send_str(data.decode().rstrip("\n"))

            connection = Connection(FrameReader(stream), write, _Notes(on_note))
            serving = asyncio.create_task(connection.serve())
            pumping = asyncio.create_task(_pump(ws, stream))
            try:
                yield cls(connection)
            finally:
                pumping.cancel()
                await ws.close()
                stream.feed_eof()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(serving, CALL_TIMEOUT_S)
                await connection.finish(0)

    async def call(self, method: str, params: c.Wire | None = None) -> Any:
        """The method's result, parsed with its contract model; raises `Refused` with the
        gateway's error, or `GatewayUnreachable` when the connection is gone."""
        params_model, result_model, _ = c.METHODS[method]
        body = (params or params_model()).model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            result = await self._connection.request(method, body, CALL_TIMEOUT_S)
        except RpcError as exc:
            raise Refused(method, exc.code, exc.message) from None
        except (ConnectionClosed, TimeoutError) as exc:
            raise GatewayUnreachable(f"{method}: the gateway did not answer ({exc})") from None
        return result_model.model_validate(result)


class _Notes:
    def __init__(self, on_note: NoteHandler) -> None:
        self._on_note = on_note

    async def handle_request(self, method: str, params: dict[str, Any]) -> Any:
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    async def handle_notification(self, method: str, params: dict[str, Any]) -> None:
        known = c.NOTIFICATIONS.get(method)
        if known is None:
            return  # a newer gateway's notification: nothing this client shows
        try:
            note = known[0].model_validate(params)
        except ValidationError:
            return
        self._on_note(method, note)


async def _pump(ws: aiohttp.ClientWebSocketResponse, stream: asyncio.StreamReader) -> None:
    """The socket's text messages as the connection's frames, until it closes."""
    try:
        async for message in ws:
            if message.type == aiohttp.WSMsgType.TEXT:
                stream.feed_data(message.data.encode() + b"\n")
    finally:
        stream.feed_eof()
