"""The gateway's aiohttp application: `/health`, `/login`, the web UI's files, and Raven RPC
on `/rpc`.

Built by `make_app`; only the CLI runs it. The web UI's files are public (they hold no
data); `/rpc` needs the token or a login cookie and checks Host and Origin against the
gateway's own address before upgrading. Every response carries a strict
Content-Security-Policy. Sockets are closed on shutdown.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import struct
import termios
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from aiohttp import WSMsgType, web

from raven import __version__
from raven.engine import Runtime
from raven.gateway.auth import COOKIE, LOGIN_LINK_TTL_S, Gatekeeper
from raven.gateway.rpc import Hub, Peer
from raven.web import FILES

log = logging.getLogger(__name__)

HUB = web.AppKey("hub", Hub)
GATE = web.AppKey("gate", Gatekeeper)
SOCKETS = web.AppKey("sockets", dict[web.WebSocketResponse, asyncio.Transport])
A2A_MOUNTED = web.AppKey("a2a_mounted", bool)
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
SEND_TIMEOUT_S = 10.0
QUICK_FRAME_BYTES = 16 * 1024
"""A frame at most this big, sent while nothing waits in the transport (below its 64 KiB
high-water mark), cannot block: it is sent without a deadline."""
CLOSE_WAIT_S = 1.0
ABANDON_S = 30.0
"""A socket that cannot take a message within this long is closed (a slow UI)."""
CLOSE_GOING_AWAY = 1001
CLOSE_TOO_SLOW = 1013


class Endpoint(Protocol):
    """Another face served at one path behind the gate (ACP at `/acp`): over a WebSocket
    (`socket` gets it once admitted and upgraded, and returns when it is done) or over
    plain HTTP requests, each admitted before its handler runs."""

    async def socket(self, ws: web.WebSocketResponse) -> None: ...

    async def post(self, request: web.Request) -> web.StreamResponse: ...

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """A GET that is not a WebSocket upgrade."""
        ...

    async def delete(self, request: web.Request) -> web.StreamResponse: ...

    async def aclose(self) -> None:
        """The server is stopping: end what is still open."""
        ...


def gated_app(gate: Gatekeeper, endpoints: Mapping[str, Endpoint] = {}) -> web.Application:
    """An app whose `endpoints`, by path, are behind `gate`, with the gateway's security
    headers; on shutdown its endpoints end and its sockets are told, then cut off."""
    app = web.Application(client_max_size=MAX_MESSAGE_BYTES)
    app[GATE] = gate
    app[SOCKETS] = {}
    for path, endpoint in endpoints.items():
        app.router.add_get(path, _endpoint_get(endpoint))
        app.router.add_post(path, _gated(endpoint.post))
        app.router.add_delete(path, _gated(endpoint.delete))
        app.on_shutdown.append(_ending(endpoint))
    app.on_response_prepare.append(_security_headers)
    app.on_shutdown.append(_close_sockets)
    return app


def _ending(endpoint: Endpoint) -> Callable[[web.Application], Awaitable[None]]:
    async def end(_: web.Application) -> None:
        await endpoint.aclose()

    return end


def make_app(
    runtime: Runtime, gate: Gatekeeper, endpoints: Mapping[str, Endpoint] = {}
) -> web.Application:
    """The gateway app over `runtime`; `gate` decides who may use it, and `endpoints` are
    other faces', by path, behind the same gate."""
    app = gated_app(gate, endpoints)
    app[HUB] = Hub(runtime, lambda: app.get(A2A_MOUNTED, False))
    app.router.add_get("/health", _health)
    app.router.add_get("/login", _login)
    app.router.add_post("/login-links", _new_login_link)
    app.router.add_get("/rpc", _rpc)
    app.router.add_get("/", _page)
    app.router.add_static("/app/", FILES, append_version=False)
    app.on_startup.append(_start)
    app.on_shutdown.insert(0, _stop_turns)
    return app


async def _start(app: web.Application) -> None:
    """With replicas sharing the session store: hear them before serving anyone."""
    await app[HUB].runtime.start()


CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    if request.path == "/" or request.path.startswith("/app/"):
        response.headers["Cache-Control"] = "no-cache"


async def _page(request: web.Request) -> web.StreamResponse:
    if not request.app[GATE].trusted_host(request.headers.get("Host")):
        raise web.HTTPForbidden(text="unexpected Host")
    return web.FileResponse(FILES / "index.html")


async def _new_login_link(request: web.Request) -> web.Response:
    """A fresh one-time login link, for `raven web` attaching to a running gateway."""
    gate = request.app[GATE]
    if not gate.trusted_host(request.headers.get("Host")):
        raise web.HTTPForbidden(text="unexpected Host")
    if not gate.bearer(request.headers.get("Authorization")):
        raise web.HTTPUnauthorized(
            text="the gateway token is required",
            headers={"WWW-Authenticate": 'Bearer realm="raven"'},
        )
    return web.json_response({"path": f"/login?code={gate.new_login_code()}"})


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"ok": True, "name": "raven", "version": __version__})


async def _login(request: web.Request) -> web.StreamResponse:
    gate = request.app[GATE]
    if not gate.trusted_host(request.headers.get("Host")):
        raise web.HTTPForbidden(text="unexpected Host")
    cookie = gate.spend_login_code(request.query.get("code", ""))
    if cookie is None and gate.authorized(None, request.cookies.get(COOKIE)):
        raise web.HTTPFound("/")  # a used link opened again in the browser it logged in
    if cookie is None:
        raise web.HTTPForbidden(
            text="this login link is not valid, was used already or has expired (a link lasts "
            f"{LOGIN_LINK_TTL_S / 60:g} minutes); `raven web` prints a fresh one"
        )
    response = web.HTTPFound("/")
    response.set_cookie(COOKIE, cookie, httponly=True, samesite="Strict", path="/")
    return response


def _admit(request: web.Request) -> None:
    """Raise the HTTP error a request gets unless its Host, Origin and credentials pass
    the gate (before any of its body is read)."""
    gate = request.app[GATE]
    if not gate.trusted_host(request.headers.get("Host")):
        raise web.HTTPForbidden(text="unexpected Host")
    if not gate.trusted_origin(request.headers.get("Origin")):
        raise web.HTTPForbidden(text="cross-origin requests are refused")
    if not gate.authorized(request.headers.get("Authorization"), request.cookies.get(COOKIE)):
        raise web.HTTPUnauthorized(
            text="the gateway token or a login cookie is required",
            headers={"WWW-Authenticate": 'Bearer realm="raven"'},
        )


async def _admitted(request: web.Request) -> tuple[web.WebSocketResponse, asyncio.Transport]:
    """The request's WebSocket, upgraded once it passes the gate, and kept to be closed
    at shutdown."""
    _admit(request)
    ws = web.WebSocketResponse(max_msg_size=MAX_MESSAGE_BYTES, heartbeat=30)
    await ws.prepare(request)
    transport = request.transport
    assert transport is not None
    request.app[SOCKETS][ws] = transport
    return ws, transport


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _gated(handler: Handler) -> Handler:
    async def route(request: web.Request) -> web.StreamResponse:
        _admit(request)
        return await handler(request)

    return route


def _endpoint_get(endpoint: Endpoint) -> Handler:
    async def route(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() != "websocket":
            _admit(request)
            return await endpoint.stream(request)
        ws, _ = await _admitted(request)
        try:
            await endpoint.socket(ws)
        finally:
            request.app[SOCKETS].pop(ws, None)
        return ws

    return route


async def _rpc(request: web.Request) -> web.StreamResponse:
    ws, transport = await _admitted(request)
    hub = request.app[HUB]
    closing: set[asyncio.Task[Any]] = set()

    def blocked() -> bool:
        return transport.get_write_buffer_size() >= transport.get_write_buffer_limits()[1]

    def drop() -> None:
        task = asyncio.create_task(_hang_up(ws, transport))
        closing.add(task)
        task.add_done_callback(closing.discard)

    async def send(frame: bytes) -> None:
        """One text frame of UTF-8 JSON, as encoded (it is never decoded and encoded again)."""
        if len(frame) <= QUICK_FRAME_BYTES and not transport.get_write_buffer_size():
            # Nothing waits in the transport and the frame is too small to fill it: the
            # write cannot block, so it needs no deadline (a timer for every event).
            await ws.send_frame(frame, WSMsgType.TEXT)
            return
        try:  # not wait_for: a frame the socket takes at once is sent without yielding
            async with asyncio.timeout(SEND_TIMEOUT_S):
                await ws.send_frame(frame, WSMsgType.TEXT)
        except TimeoutError:
            log.warning("a Raven RPC socket took no message for %gs; dropped", SEND_TIMEOUT_S)
            peer.hang_up()
        except asyncio.CancelledError:
            if not _stale_drain():
                raise
            peer.hang_up()

    ws_socket = transport.get_extra_info("socket")

    def waiting() -> int:
        return (
            0 if transport.is_closing() else transport.get_write_buffer_size() + _unread(ws_socket)
        )

    peer = Peer(hub, send, drop, blocked, waiting)
    hub.peers.add(peer)
    serving = asyncio.create_task(peer.connection.serve())
    try:
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                peer.feed(message.data)
            elif message.type == WSMsgType.ERROR:
                break
    finally:
        request.app[SOCKETS].pop(ws, None)
        hub.forget(peer)
        peer.reader.feed_eof()
        try:
            await serving
            await peer.connection.finish(1.0)
        finally:  # also when aiohttp cancels the handler of a connection that went away
            peer.connection.close()
    return ws


def _unread(sock: Any) -> int:
    """Bytes the kernel holds for the socket that its peer has not taken (sent and not
    yet acknowledged, or not yet sent: Linux's SIOCOUTQ); 0 where it cannot tell."""
    try:
        answer = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
    except (OSError, AttributeError, ValueError):
        return 0
    return int(struct.unpack("i", answer)[0])


def _stale_drain() -> bool:
    """Whether a `CancelledError` was not meant for this task: aiohttp hands every writer
    of a connection one drain waiter, and a write cancelled by its deadline cancels it for
    the writers after it too (aio-libs/aiohttp#12307). The socket is then as good as gone."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0


async def _close(ws: web.WebSocketResponse, code: int, message: bytes) -> bool:
    """Close without waiting on a UI that does not read: the close frame goes out after
    what is already buffered, then the connection ends. False when the UI took none of it
    within `CLOSE_WAIT_S`: the transport is shut, but waits to flush what it holds."""
    try:
        async with asyncio.timeout(CLOSE_WAIT_S):
            await ws.close(code=code, message=message)
    except TimeoutError:
        return False  # aiohttp shuts the transport when its close is cancelled
    except asyncio.CancelledError:
        if not _stale_drain():
            raise
        return False  # as for a timeout
    return True


async def _hang_up(ws: web.WebSocketResponse, transport: asyncio.Transport) -> None:
    """Close with 1013; a UI that still reads nothing after `ABANDON_S` is cut off, its
    buffer freed."""
    await _close(ws, CLOSE_TOO_SLOW, b"too slow")
    asyncio.get_running_loop().call_later(ABANDON_S, transport.abort)


async def _stop_turns(app: web.Application) -> None:
    """Running turns are cancelled (before the sockets are closed: they hear it)."""
    await app[HUB].aclose()


async def _close_sockets(app: web.Application) -> None:
    """Every socket is told the server is going away, and one that does not take it is
    cut off."""
    sockets = list(app[SOCKETS].items())
    going = b"the gateway is shutting down"
    closed = await asyncio.gather(*(_close(ws, CLOSE_GOING_AWAY, going) for ws, _ in sockets))
    for (_, transport), clean in zip(sockets, closed, strict=True):
        if not clean:  # a UI that reads nothing would hold the shutdown for ever
            transport.abort()
