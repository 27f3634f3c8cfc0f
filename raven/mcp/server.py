"""One connection to one MCP server, held open by a task of its own.

The SDK's transports are context managers that must be entered and left in the
same task, so `_run` owns them from handshake to shutdown; callers talk to the
live `ClientSession`. Stopping closes the transport, which stops the server's
whole process group. Never raises SDK or transport exceptions at its callers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal, TextIO

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED

from raven import lifeline
from raven.config import McpHttpServer, McpStdioServer
from raven.sandbox import Sandbox, SandboxUnavailable, enforcement, scrubbed
from raven.tools import ToolError, ToolOutput

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 10.0
Status = Literal["idle", "ready", "failed", "exited", "stopped"]


class McpServer:
    def __init__(
        self, spec: McpStdioServer | McpHttpServer, errlog: TextIO, jail: Sandbox | None = None
    ) -> None:
        self.spec = spec
        self._jail = jail or Sandbox()
        """Raven's sandbox, with its own files: what a stdio server's `sandbox` applies on."""
        self.name = spec.name
        self.status: Status = "idle"
        self.problem: str | None = None
        self.reported = False
        """Whether the problem has been told to a person already."""
        self.tools: list[types.Tool] = []
        self.resources: list[types.Resource] = []
        self.templates: list[types.ResourceTemplate] = []
        self._errlog = errlog
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()

    @property
    def offers_resources(self) -> bool:
        return bool(self.resources or self.templates)

    def resource_summary(self) -> str:
        uris = [r.uri for r in self.resources[:10]] + [t.uri_template for t in self.templates[:10]]
        return ", ".join(str(u) for u in uris)

    async def connect(self) -> None:
        """Start the server and finish the handshake, or record why not. Never raises."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"mcp:{self.name}")
        await self._ready.wait()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), STOP_TIMEOUT_S)
            except TimeoutError:
                log.warning("MCP server %s did not stop in %.0fs", self.name, STOP_TIMEOUT_S)
                self._task.cancel()

    async def call_tool(self, name: str, arguments: dict[str, Any], timeout_s: float) -> Any:
        session = self._live_session()
        try:
            return await session.call_tool(name, arguments, read_timeout_seconds=timeout_s)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise self._lost() from exc
            raise ToolError(f"MCP server {self.name}: {exc.message}") from exc
        except Exception as exc:
            log.warning("MCP server %s: call to %s failed: %r", self.name, name, exc)
            raise self._lost() from exc

    async def read_resource(self, uri: str, timeout_s: float) -> ToolOutput:
        session = self._live_session()
        try:
            async with asyncio.timeout(timeout_s):
                result = await session.read_resource(uri)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise self._lost() from exc
            raise ToolError(f"MCP server {self.name}: {exc.message}") from exc
        except TimeoutError as exc:
            raise ToolError(f"MCP server {self.name}: no answer in {timeout_s:g}s") from exc
        texts = []
        for item in result.contents:
            text = getattr(item, "text", None)
            texts.append(text if text is not None else f"[binary {item.mime_type} at {item.uri}]")
        return ToolOutput("\n".join(texts) or "(empty resource)")

    def _live_session(self) -> ClientSession:
        if self._session is None or self.status != "ready":
            raise ToolError(
                f"MCP server {self.name} is not connected ({self.problem or self.status})"
            )
        return self._session

    def _lost(self) -> ToolError:
        self.status = "exited"
        self.problem = "stopped responding (the server exited or closed its connection)"
        log.warning("MCP server %s %s", self.name, self.problem)
        return ToolError(f"MCP server {self.name} {self.problem}")

    async def _run(self) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(ClientSession(read, write))
                async with asyncio.timeout(self.spec.timeout_s):
                    init = await session.initialize()
                    self.tools = await _all_tools(session)
                    if init.capabilities.resources is not None:
                        self.resources = (await session.list_resources()).resources
                        self.templates = (
                            await session.list_resource_templates()
                        ).resource_templates
                self._session = session
                self.status = "ready"
                log.info("MCP server %s ready with %d tools", self.name, len(self.tools))
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:
            if isinstance(_root(exc), TimeoutError):
                self._fail(f"did not finish its handshake within {self.spec.timeout_s:g}s")
            elif isinstance(_root(exc), SandboxUnavailable):
                self._fail(f"was not started: it {_root(exc)}")
            else:
                self._fail(f"failed to start: {_describe(_root(exc))} (its stderr: logs/mcp.log)")
        finally:
            self._session = None
            if self.status == "ready":
                self.status = "stopped"
            self._ready.set()

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        """The SDK transport's stream pair; closes what it opened, the server included."""
        spec = self.spec
        if isinstance(spec, McpStdioServer) and spec.sandbox is not None:
            async with self._jailed(spec, self._jail.under(spec.sandbox)) as streams:
                yield streams
            return
        if isinstance(spec, McpStdioServer):
            params = StdioServerParameters(
                command=spec.command,
                args=spec.args,
                env={**os.environ, **spec.env, **lifeline.env()},
                cwd=spec.cwd,
            )
            async with stdio_client(params, errlog=self._errlog) as streams:
                yield streams
            return
        async with (
            create_mcp_http_client(headers=spec.headers) as client,
            streamable_http_client(spec.url, http_client=client) as streams,
        ):
            yield streams

    @contextlib.asynccontextmanager
    async def _jailed(self, spec: McpStdioServer, sandbox: Sandbox) -> AsyncIterator[Any]:
        """The stdio server started in `sandbox`, by way of `python -m raven.sandbox` (the
        SDK starts the process): its environment without credentials but its own `env`, a
        temp directory of its own, removed once it has stopped."""
        if not sandbox.enforced:
            raise SandboxUnavailable(
                f"requires the {sandbox.level} sandbox: {enforcement(sandbox.level)}"
            )
        from raven.sandbox.confine import exec_argv

        cwd = _working_directory(spec)
        temp = Path(tempfile.mkdtemp(prefix="raven-mcp-"))
        try:
            argv = exec_argv(sandbox, cwd, temp, [spec.command, *spec.args])
            env = {**scrubbed(os.environ), "TMPDIR": str(temp), **spec.env, **lifeline.env()}
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)
            async with stdio_client(params, errlog=self._errlog) as streams:
                yield streams
        finally:
            shutil.rmtree(temp, ignore_errors=True)

    def _fail(self, problem: str) -> None:
        self.status = "failed"
        self.problem = problem
        log.warning("MCP server %s %s", self.name, problem)


async def _all_tools(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools


def _root(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio wraps transport failures in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _working_directory(spec: McpStdioServer) -> Path:
    """Where a stdio server works: its `cwd`, else Raven's own."""
    return Path(os.path.abspath(spec.cwd or os.curdir))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, MCPError):
        return exc.message
    return str(exc) or type(exc).__name__
