"""ACP at one HTTP endpoint (`/acp`), as the ACP transport RFD binds it: a WebSocket (each
text message one JSON-RPC frame) or Streamable HTTP (`initialize` POSTed and answered in
the body with an `Acp-Connection-Id`; every later client frame POSTed and answered 202;
the agent's frames sent back on server-sent event streams, one for the connection and
one for each of its sessions, `Acp-Session-Id`). Each connection is served by its own
`AcpServer` on a runtime another owns (the gateway's, or `raven acp --listen`'s).

Never admits a request itself: the app in front checks the token, Host and Origin before
any handler here runs (`raven.gateway.app.gated_app`). Never closes the runtime. Every
frame sent passes through redaction, as on stdio. What a connection has not sent yet is
bounded: a client that does not read its streams is dropped, never buffered for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections import deque
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from raven.acp import protocol as p
from raven.acp.server import AcpServer
from raven.jsonrpc import PARSE_ERROR, Connection, FrameReader, RpcError
from raven.jsonrpc.stdio import WriteFn
from raven.redact import redact_json

if TYPE_CHECKING:
    from raven.engine import Runtime

log = logging.getLogger(__name__)

ACP_PATH = "/acp"
"""Where ACP is served (the RFD's endpoint), on the gateway or `raven acp --listen`."""
CONNECTION_ID_HEADER = "Acp-Connection-Id"
SESSION_ID_HEADER = "Acp-Session-Id"
SSE = "text/event-stream"
FINISH_S = 3.0
"""How long a closed connection's running requests get before they are cancelled."""
INITIALIZE_S = 30.0
"""How long the `initialize` POST waits for its answer."""
KEEPALIVE_S = 15.0
"""An idle event stream gets a comment this often, so proxies keep it open."""
MAX_CONNECTIONS = 256
"""Connections served at once, WebSocket and Streamable HTTP together."""
MAX_UNSENT_BYTES = 16 * 1024 * 1024
"""A Streamable HTTP connection whose unread frames pass this is dropped (a client that
stopped reading, or never opened its stream)."""
IDLE_S = 600.0
"""A Streamable HTTP connection with no stream open and nothing posted this long is let
go, as if the client had sent DELETE."""
CLOSE_UNSUPPORTED = 1003
CLOSE_TRY_LATER = 1013

_SESSION_SCOPED = frozenset(
    {
        p.SESSION_PROMPT,
        p.SESSION_CANCEL,
        p.SESSION_SET_MODE,
        p.SESSION_SET_CONFIG_OPTION,
        p.SESSION_CLOSE,
    }
)
"""Methods whose POST names its session (`Acp-Session-Id`), as the RFD lists them."""


def _problem(status: int, text: str) -> web.Response:
    return web.json_response({"error": text}, status=status)


class AcpEndpoint:
    """Every ACP connection made at one endpoint, over `runtime`."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._streamed: dict[str, _Streamed] = {}
        self._sockets = 0

    def _full(self) -> bool:
        return self._sockets + len(self._streamed) >= MAX_CONNECTIONS

    # -- WebSocket -------------------------------------------------------------------------

    async def socket(self, ws: web.WebSocketResponse) -> None:
        """Serve ACP on an admitted socket until it closes; the connection's running turns
        are cancelled then (a reconnecting editor loads the session: it is stored)."""
        if self._full():
            await ws.close(code=CLOSE_TRY_LATER, message=b"too many ACP connections")
            return
        self._sockets += 1
        reader = asyncio.StreamReader()

        async def write(frame: bytes) -> None:
            if not ws.closed:
                await ws.send_str(frame.decode().rstrip("\n"))

        served = _Served(self._runtime, reader, write)
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
            self._sockets -= 1
            await served.close()
            log.info("an ACP client over WebSocket left")

    # -- Streamable HTTP -------------------------------------------------------------------

    async def post(self, request: web.Request) -> web.Response:
        """One client frame: `initialize` answered in the body, any other accepted (202)."""
        if not request.content_type.startswith("application/json"):
            return _problem(415, "Content-Type must be application/json")
        try:
            message = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError, RecursionError):
            error = RpcError(PARSE_ERROR, "Parse error: invalid JSON").to_wire()
            return web.json_response({"jsonrpc": "2.0", "id": None, "error": error}, status=400)
        if isinstance(message, list):
            return _problem(501, "batches are not supported")
        if not isinstance(message, dict):
            return _problem(400, "a JSON-RPC message is an object")
        if message.get("method") == p.INITIALIZE and "id" in message:
            return await self._initialize(message)
        streamed = self._connection(request)
        if isinstance(streamed, web.Response):
            return streamed
        session_id = request.headers.get(SESSION_ID_HEADER)
        if message.get("method") in _SESSION_SCOPED and session_id is None:
            return _problem(400, f"{message['method']} needs the {SESSION_ID_HEADER} header")
        if session_id is not None and session_id not in streamed.sessions:
            return _problem(404, "unknown session on this connection")
        streamed.deliver(message)
        return web.Response(status=202)

    async def _initialize(self, message: dict[str, Any]) -> web.Response:
        if self._full():
            return _problem(503, "too many ACP connections; try again later")
        connection_id = secrets.token_hex(16)
        streamed = _Streamed(self._runtime, lambda: self._let_go(connection_id))
        self._streamed[connection_id] = streamed
        log.info("an ACP client connected over Streamable HTTP")
        try:
            async with asyncio.timeout(INITIALIZE_S):
                answer = await streamed.initialize(message)
        except TimeoutError:
            await self._let_go(connection_id)
            return _problem(504, "initialize was not answered in time")
        if "error" in answer:
            await self._let_go(connection_id)
            return web.json_response(answer)
        return web.json_response(answer, headers={CONNECTION_ID_HEADER: connection_id})

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """The connection's event stream, or one of its sessions' (`Acp-Session-Id`)."""
        streamed = self._connection(request)
        if isinstance(streamed, web.Response):
            return streamed
        session_id = request.headers.get(SESSION_ID_HEADER)
        if session_id is not None:
            # A client may open a session's stream before it loads the session (the
            # TypeScript SDK's does): the stream carries only that session's frames of
            # this connection, and the load says whether the session exists.
            streamed.sessions.add(session_id)
        response = web.StreamResponse(
            headers={"Content-Type": SSE, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )
        await response.prepare(request)
        await streamed.pour(session_id, response)
        return response

    async def delete(self, request: web.Request) -> web.Response:
        """The client is done with the connection: its running turns are cancelled."""
        streamed = self._connection(request)
        if isinstance(streamed, web.Response):
            return streamed
        await self._let_go(request.headers[CONNECTION_ID_HEADER])
        return web.Response(status=202)

    def _connection(self, request: web.Request) -> _Streamed | web.Response:
        connection_id = request.headers.get(CONNECTION_ID_HEADER)
        if connection_id is None:
            return _problem(400, f"the {CONNECTION_ID_HEADER} header is missing")
        streamed = self._streamed.get(connection_id)
        if streamed is None:
            return _problem(404, "unknown connection (it ended, or was never made)")
        return streamed

    async def _let_go(self, connection_id: str) -> None:
        streamed = self._streamed.pop(connection_id, None)
        if streamed is not None:
            await streamed.close()
            log.info("an ACP client over Streamable HTTP left")

    async def aclose(self) -> None:
        """End every Streamable HTTP connection (the server is stopping)."""
        await asyncio.gather(*(self._let_go(c) for c in list(self._streamed)))


class _Served:
    """One ACP connection: its `AcpServer`, fed frames through `reader`, writing with
    `write`."""

    def __init__(self, runtime: Runtime, reader: asyncio.StreamReader, write: WriteFn) -> None:
        self._reader = reader
        self.server = AcpServer(lambda: runtime, owns_runtime=False)
        self.connection = Connection(FrameReader(reader), write, self.server, redact_json)
        self.server.attach(self.connection)
        self._serving = asyncio.create_task(self.connection.serve())

    async def close(self) -> None:
        self._reader.feed_eof()
        await self.server.shutdown()
        await asyncio.wait([self._serving], timeout=FINISH_S)
        await self.connection.finish(FINISH_S)
        await self.server.aclose()


class _Outbox:
    """The frames of one stream not yet sent, as server-sent events, and whether a client
    is reading them now."""

    def __init__(self) -> None:
        self.events: deque[bytes] = deque()
        self.ready = asyncio.Event()
        self.reader: asyncio.Task[Any] | None = None
        """The request handler sending them now, if a client reads the stream."""

    def put(self, event: bytes) -> None:
        self.events.append(event)
        self.ready.set()


class _Streamed:
    """A Streamable HTTP connection: frames in from POSTs, out onto the connection's
    stream or a session's. A session's frames go to its stream once the client opened it
    (before that, to the connection's, which the client reads as well).

    The client reads its streams side by side, so frames that must arrive in order go on
    one: while a request of a session runs, everything of that session (its updates, the
    questions it asks, its answer) goes where the request's first frame would have gone,
    even if the client opens the session's stream meanwhile."""

    def __init__(self, runtime: Runtime, let_go: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._reader = asyncio.StreamReader()
        self._let_go = let_go
        self._streams: dict[str | None, _Outbox] = {None: _Outbox()}
        self._routes: dict[str, str] = {}
        """Ids of the client's requests naming a session, running: the session of each."""
        self._pinned: dict[str, tuple[str | None, int]] = {}
        """Sessions with requests running: the stream their frames go to (None: the
        connection's), and how many requests."""
        self._asked: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.sessions: set[str] = set()
        """The sessions this connection named or was given."""
        self._unsent = 0
        self._idle: asyncio.TimerHandle | None = None
        self._dropping: asyncio.Task[None] | None = None
        self._served = _Served(runtime, self._reader, self._write)
        self._touch()

    async def initialize(self, message: dict[str, Any]) -> dict[str, Any]:
        answer = asyncio.get_running_loop().create_future()
        self._asked[str(message["id"])] = answer
        self.deliver(message)
        return await answer

    def deliver(self, message: dict[str, Any]) -> None:
        self._touch()
        params = message.get("params")
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if isinstance(session_id, str):
            self.sessions.add(session_id)
            if "method" in message and "id" in message:
                self._routes[str(message["id"])] = session_id
                self._pin(session_id)
        frame = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        self._reader.feed_data(frame.encode() + b"\n")

    async def _write(self, frame: bytes) -> None:
        message = json.loads(frame)
        key = str(message.get("id"))
        if "method" not in message:  # an answer to one of the client's requests
            asked = self._asked.pop(key, None)
            if asked is not None:
                if not asked.done():
                    asked.set_result(message)
                return
            result = message.get("result")
            given = result.get("sessionId") if isinstance(result, dict) else None
            if isinstance(given, str):
                self.sessions.add(given)
            session_id = self._routes.pop(key, None)
            outbox = self._outbox(session_id)
            if session_id is not None:
                self._unpin(session_id)
        else:
            params = message.get("params")
            named = params.get("sessionId") if isinstance(params, dict) else None
            outbox = self._outbox(named if isinstance(named, str) else None)
        event = b"data: " + frame.rstrip(b"\n") + b"\n\n"
        outbox.put(event)
        self._unsent += len(event)
        if self._unsent > MAX_UNSENT_BYTES and self._dropping is None:
            log.warning("an ACP client over HTTP stopped reading its streams; dropped")
            self._drop()

    def _reading(self, session_id: str) -> bool:
        outbox = self._streams.get(session_id)
        return outbox is not None and outbox.reader is not None

    def _pin(self, session_id: str) -> None:
        where, running = self._pinned.get(session_id, (None, 0))
        if not running:
            where = session_id if self._reading(session_id) else None
        self._pinned[session_id] = (where, running + 1)

    def _unpin(self, session_id: str) -> None:
        where, running = self._pinned.pop(session_id, (None, 1))
        if running > 1:
            self._pinned[session_id] = (where, running - 1)

    def _outbox(self, session_id: str | None) -> _Outbox:
        """Where a frame of `session_id` (None: of no session) goes now."""
        if session_id is not None:
            where = self._pinned.get(session_id, (session_id, 0))[0]
            if where is not None and self._reading(where):
                return self._streams[where]
        return self._streams[None]

    async def pour(self, session_id: str | None, response: web.StreamResponse) -> None:
        """Send the stream's frames to `response` until the client goes or the connection
        ends; a client opening the same stream again takes it over. A session's frames
        left unsent when its stream closes go to the connection's, in order."""
        outbox = self._streams.setdefault(session_id, _Outbox())
        me = asyncio.current_task()
        outbox.reader = me
        outbox.ready.set()  # a reader it replaces sees it is no longer one, and ends
        self._touch()
        try:
            while outbox.reader is me:
                outbox.ready.clear()
                while outbox.events and outbox.reader is me:
                    event = outbox.events.popleft()
                    self._unsent -= len(event)
                    await response.write(event)
                if outbox.reader is not me:
                    break
                try:
                    async with asyncio.timeout(KEEPALIVE_S):
                        await outbox.ready.wait()
                except TimeoutError:
                    await response.write(b": keepalive\n\n")
        except ConnectionError:
            pass
        finally:
            if outbox.reader is me:
                outbox.reader = None
                if session_id is not None:
                    self._streams[None].events.extend(outbox.events)
                    outbox.events.clear()
                    self._streams[None].ready.set()
                self._touch()

    def _touch(self) -> None:
        """Start the idle clock again (it runs only while no stream is open)."""
        if self._idle is not None:
            self._idle.cancel()
        self._idle = None
        if all(o.reader is None for o in self._streams.values()):
            self._idle = asyncio.get_running_loop().call_later(IDLE_S, self._drop)

    def _drop(self) -> None:
        """End the connection from within (idle, or a client that does not read)."""
        self._dropping = asyncio.get_running_loop().create_task(self._let_go())

    async def close(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        for outbox in self._streams.values():
            outbox.reader = None
            outbox.ready.set()  # its reader sees it is no longer one, and ends
        for asked in self._asked.values():
            asked.cancel()
        with contextlib.suppress(Exception):
            await self._served.close()
