"""`python -m raven.broker.mcp_server`: the broker's `a2a` tool as a stdio MCP server.

Raven lists it in a child's `session/new` `mcpServers`, so any agent that takes MCP
servers (codex, Claude Code, gemini) has the tool. It reaches the broker over the
channel named in its environment, with the token there: neither is ever in what the
model sees. Stdout carries MCP frames only.
"""

from __future__ import annotations

import os
import sys
from typing import Literal

from mcp.server.mcpserver import MCPServer

from raven.broker.channel import ask
from raven.broker.entry import SOCKET_ENV, TOKEN_ENV
from raven.broker.task import BrokerError
from raven.broker.tool import DESCRIPTION, NAME, A2AArgs, arguments, refused, shown

server = MCPServer("raven")


@server.tool(name=NAME, description=DESCRIPTION)
async def a2a(
    action: Literal["discover", "send", "get", "wait", "complete", "cancel"],
    to: str | None = None,
    task_id: str | None = None,
    text: str | None = None,
    needs: Literal["input", "auth"] | None = None,
    outcome: Literal["completed", "failed", "rejected"] | None = None,
    timeout_s: float | None = None,
) -> str:
    args = A2AArgs(
        action=action,
        to=to,
        task_id=task_id,
        text=text,
        needs=needs,
        outcome=outcome,
        timeout_s=timeout_s,
    )
    name, given = arguments(args)
    try:
        return shown(await ask(os.environ[SOCKET_ENV], _TOKEN, name, given))
    except BrokerError as exc:
        raise ValueError(refused(exc)) from None
    except OSError as exc:
        raise ValueError(f"the broker cannot be reached: {exc}") from None


_TOKEN = os.environ.pop(TOKEN_ENV, "")
"""Taken out of the environment: nothing this server might start inherits it."""

if __name__ == "__main__":
    if SOCKET_ENV not in os.environ or not _TOKEN:
        sys.stderr.write(f"broker server: {SOCKET_ENV} and {TOKEN_ENV} must be set by Raven\n")
        sys.exit(2)
    server.run()
