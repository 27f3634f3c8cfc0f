"""`python -m raven.broker.mcp_server`: the broker's `a2a` tool as a stdio MCP server.

Raven lists it in a child's `session/new` `mcpServers`, so any agent that takes MCP
servers (codex, Claude Code, gemini) has the tool. It reaches the broker over the
channel named in its environment, with the token there: neither is ever in what the
model sees. An agent often lists its MCP tools while its turn already runs, so the
server is ready at once: it speaks the three methods a tool server needs (`initialize`,
`tools/list`, `tools/call`) on Raven's own JSON-RPC layer, in a tenth of the time and
memory the MCP SDK's server takes to start; the tool's description and input schema
are `a2a_tool.json`, generated from `raven.broker.tool`. Stdout carries frames only.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from raven import __version__
from raven.broker.channel import ask, refused, shown
from raven.broker.entry import SOCKET_ENV, TOKEN_ENV
from raven.broker.task import BrokerError
from raven.jsonrpc import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    Connection,
    FrameReader,
    RpcError,
    open_stdio,
)
from raven.jsonrpc.stdio import reserve_stdout

TOOL: dict[str, Any] = json.loads(Path(__file__).with_name("a2a_tool.json").read_text())
VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""The MCP protocol versions it speaks, newest first."""


class ToolServer:
    def __init__(self, socket: str, token: str) -> None:
        self._socket = socket
        self._token = token

    async def handle_request(self, method: str, params: dict[str, Any]) -> Any:
        if method == "initialize":
            asked = params.get("protocolVersion")
            return {
                "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raven", "version": __version__},
            }
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [TOOL]}
        if method == "tools/call":
            if params.get("name") != TOOL["name"]:
                raise RpcError(INVALID_PARAMS, f"Unknown tool: {params.get('name')}")
            return await self._call(params.get("arguments") or {})
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    async def handle_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def _call(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's result; a refusal is a result the model reads (`isError`)."""
        given = {k: v for k, v in arguments.items() if v is not None}
        action = given.pop("action", None)
        try:
            if not isinstance(action, str):
                raise BrokerError("invalid_request", "action is required")
            text = shown(await ask(self._socket, self._token, action, given))
        except BrokerError as exc:
            return _result(refused(exc), error=True)
        except OSError as exc:
            return _result(f"the broker cannot be reached: {exc}", error=True)
        return _result(text)


def _result(text: str, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": error}


async def serve(socket: str, token: str) -> None:
    frames_fd = reserve_stdout()
    reader, write = await open_stdio(0, frames_fd)
    connection = Connection(FrameReader(reader), write, ToolServer(socket, token))
    await connection.serve()
    await connection.finish(5.0)


if __name__ == "__main__":
    # Taken out of the environment: nothing this server might start inherits it.
    token = os.environ.pop(TOKEN_ENV, "")
    if SOCKET_ENV not in os.environ or not token:
        sys.stderr.write(f"broker server: {SOCKET_ENV} and {TOKEN_ENV} must be set by Raven\n")
        sys.exit(2)
    asyncio.run(serve(os.environ[SOCKET_ENV], token))
