"""The private channel to the broker: JSON-RPC over a Unix socket only this user reaches.

The host serves it (`Channel`) in a directory of its own, mode 0700, made when the first
child that may use the broker starts: a Raven with no such child opens nothing. One
method, `a2a`, with the caller's token, the action and its arguments; a refusal is one
JSON-RPC error code, `BROKER_ERROR`, with `data.errorCode` naming why. `ask` is the
client's side, for the MCP server Raven gives a child and the `a2a` tool a child Raven
has natively. Never logs a token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raven.broker.task import MAX_WAIT_S, BrokerError
from raven.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, Connection, FrameReader, RpcError

if TYPE_CHECKING:
    from raven.broker.broker import Broker

log = logging.getLogger(__name__)

BROKER_ERROR = -32050
METHOD = "a2a"
ANSWER_GRACE_S = 10.0
"""How much longer than its longest wait a call may take to be answered."""


class Channel:
    """Serves one broker on a Unix socket while open."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._server: asyncio.Server | None = None
        self._dir: Path | None = None
        self._connections: set[Connection] = set()

    async def open(self) -> str:
        """The socket's path, opening it the first time."""
        if self._server is None:
            self._dir = Path(tempfile.mkdtemp(prefix="raven-broker-"))  # 0700
            path = self._dir / "socket"
            self._server = await asyncio.start_unix_server(self._serve, path=str(path))
        assert self._dir is not None
        return str(self._dir / "socket")

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            for connection in list(self._connections):
                connection.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5.0)
            self._server = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def write(data: bytes) -> None:
            writer.write(data)
            await writer.drain()

        connection = Connection(FrameReader(reader, 1024 * 1024), write, _Dispatcher(self._broker))
        self._connections.add(connection)
        try:
            await connection.serve()
            await connection.finish(MAX_WAIT_S + ANSWER_GRACE_S)
        finally:
            self._connections.discard(connection)
            connection.close()
            writer.close()


class _Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def handle_request(self, method: str, params: dict[str, Any]) -> Any:
        if method != METHOD:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        token, action, args = params.get("token"), params.get("action"), params.get("args", {})
        if not isinstance(token, str) or not isinstance(action, str) or not isinstance(args, dict):
            raise RpcError(INVALID_PARAMS, "a2a takes token, action and args (an object)")
        try:
            return await self._broker.call(token, action, args)
        except BrokerError as exc:
            if exc.code != "unknown_token":
                log.info("broker refused %s: %s", action, exc)
            raise RpcError(BROKER_ERROR, str(exc), {"errorCode": exc.code}) from None

    async def handle_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def shown(result: dict[str, Any]) -> str:
    """A broker's answer as the model reads it."""
    return json.dumps(result, ensure_ascii=False, indent=1)


def refused(exc: BrokerError) -> str:
    """A broker's refusal as the model reads it: its code, then why."""
    return f"{exc.code}: {exc}"


async def ask(path: str, token: str, action: str, args: dict[str, Any]) -> dict[str, Any]:
    """One call of the broker at `path`; `BrokerError` for its refusals, `OSError` when it
    cannot be reached."""
    reader, writer = await asyncio.open_unix_connection(path, limit=1024 * 1024)
    try:
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": METHOD,
            "params": {"token": token, "action": action, "args": args},
        }
        writer.write(json.dumps(request).encode() + b"\n")
        await writer.drain()
        async with asyncio.timeout(MAX_WAIT_S + ANSWER_GRACE_S):
            line = await reader.readline()
        if not line:
            raise OSError("the broker closed the channel without answering")
        answer = json.loads(line)
    finally:
        writer.close()
    if "error" in answer:
        error = answer["error"]
        code = (error.get("data") or {}).get("errorCode", "invalid_request")
        raise BrokerError(code, str(error.get("message", "refused")))
    result: dict[str, Any] = answer["result"]
    return result
