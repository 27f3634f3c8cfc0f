"""The `mcpServers` entry by which a parent gives a child the broker's `a2a` tool.

Light on purpose: `raven acp` reads it on every `session/new`, to take the entry as its
own `a2a` tool instead of starting the server. Holds no secret of its own.
"""

from __future__ import annotations

import sys
from typing import Any

SERVER_NAME = "raven"
SERVER_MODULE = "raven.broker.mcp_server"
SOCKET_ENV = "RAVEN_BROKER_SOCKET"
TOKEN_ENV = "RAVEN_BROKER_TOKEN"


def server_entry(socket: str, token: str) -> dict[str, Any]:
    """The ACP `mcpServers` entry of the broker's MCP server for the child holding `token`."""
    return {
        "name": SERVER_NAME,
        "command": sys.executable,
        "args": ["-m", SERVER_MODULE],
        "env": [{"name": SOCKET_ENV, "value": socket}, {"name": TOKEN_ENV, "value": token}],
    }


def broker_entry(entry: dict[str, Any]) -> tuple[str, str] | None:
    """The (socket, token) of an entry `server_entry` made, else None."""
    if entry.get("args") != ["-m", SERVER_MODULE]:
        return None
    env = {e.get("name"): e.get("value") for e in entry.get("env") or [] if isinstance(e, dict)}
    socket, token = env.get(SOCKET_ENV), env.get(TOKEN_ENV)
    if isinstance(socket, str) and isinstance(token, str) and socket and token:
        return socket, token
    return None
