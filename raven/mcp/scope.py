"""The MCP servers of one scope (the process, or one session): a tool source for turns.

Connects lazily, in parallel, when a turn first asks for tools; reports each
server's problem once; stops every server it started when it closes.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from raven.config import McpHttpServer, McpStdioServer, ToolFilter
from raven.mcp.naming import model_tool_name
from raven.mcp.server import McpServer
from raven.mcp.tools import McpTool, ReadResource
from raven.sandbox import Sandbox
from raven.tools import Tool

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerStatus:
    name: str
    status: str
    problem: str | None
    tools: list[tuple[str, str]]
    """(name the model sees, the server's own name) for each offered tool."""


class McpScope:
    def __init__(
        self,
        specs: Sequence[McpStdioServer | McpHttpServer],
        logs_dir: Path | None = None,
        jail: Sandbox | None = None,
    ) -> None:
        """`jail`: Raven's sandbox, which a stdio server's `sandbox` applies on."""
        self._errlog: TextIO = _open_errlog(logs_dir)
        self._servers = [McpServer(s, self._errlog, jail) for s in specs if s.enabled]
        self._connect_lock = asyncio.Lock()
        self._connected = False

    async def tools(self) -> tuple[list[Tool], list[str]]:
        await self._connect()
        tools: list[Tool] = []
        notices: list[str] = []
        taken: set[str] = set()
        for server in self._servers:
            if server.status == "ready":
                for remote in server.tools:
                    if not _allowed(remote.name, server.spec.tools):
                        continue
                    name = model_tool_name(server.name, remote.name, taken)
                    taken.add(name)
                    tools.append(
                        McpTool(
                            server,
                            name,
                            remote.name,
                            remote.description or "",
                            dict(remote.input_schema),
                        )
                    )
            elif server.problem and not server.reported:
                server.reported = True
                notices.append(
                    f"MCP server {server.name} {server.problem}; its tools are left out."
                )
        with_resources = {
            s.name: s for s in self._servers if s.status == "ready" and s.offers_resources
        }
        if with_resources:
            tools.append(ReadResource(with_resources))
        return tools, notices

    async def status(self) -> list[ServerStatus]:
        tools, _ = await self.tools()
        by_server: dict[str, list[tuple[str, str]]] = {}
        for tool in tools:
            if isinstance(tool, McpTool):
                by_server.setdefault(tool.server_name, []).append((tool.name, tool.remote_name))
        return [
            ServerStatus(s.name, s.status, s.problem, by_server.get(s.name, []))
            for s in self._servers
        ]

    async def release(self, session_id: str) -> None:
        """Nothing to free per session: a scope belongs to the process or to one session,
        and its owner closes it."""

    async def aclose(self) -> None:
        await asyncio.gather(*(s.stop() for s in self._servers))
        if self._errlog is not sys.stderr:
            self._errlog.close()

    async def _connect(self) -> None:
        async with self._connect_lock:
            if not self._connected:
                await asyncio.gather(*(s.connect() for s in self._servers))
                self._connected = True


def _allowed(name: str, rules: ToolFilter) -> bool:
    if rules.allow is not None and not any(fnmatch.fnmatchcase(name, p) for p in rules.allow):
        return False
    return not any(fnmatch.fnmatchcase(name, p) for p in rules.deny)


def _open_errlog(logs_dir: Path | None) -> TextIO:
    """Where servers' stderr goes: `logs/mcp.log`, never an unread pipe."""
    if logs_dir is None:
        return sys.stderr
    from raven.private_files import private_dir, private_file

    try:
        private_dir(logs_dir, narrow=True)
        return open(private_file(logs_dir / "mcp.log"), "a", encoding="utf-8")
    except OSError as exc:
        log.warning(
            "cannot open %s/mcp.log (%s); MCP servers' stderr goes to stderr",
            logs_dir,
            exc.strerror,
        )
        return sys.stderr
