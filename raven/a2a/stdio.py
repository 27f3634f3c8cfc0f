"""A2A over this process's stdin and stdout (`raven a2a stdio`): no socket, no port.

The parent process spawned Raven and is its one peer (the process boundary is the trust
boundary): no token is asked for. The binding follows the proposals of a2a-spec#2048 and
a2a-rs#138 (which build on a2a-spec#1074):
- every frame is `Content-Length: N` (other headers are read and ignored), a blank line,
  then N bytes of JSON;
- Raven speaks first, a `handshake` control frame; a client answering `handshakeAck`
  with `accept: false` ends the session, and one that sends a request at once (as
  a2a-spec#1074 has it, with no handshake) is served all the same;
- requests are JSON-RPC 2.0 with A2A 1.0's method names, several at once, answered by
  id in any order; a streaming method's events each come as a result with its id,
  then `{"id", "streamEnd": true}` (an error ends it instead); `{"id",
  "cancelStream": true}` ends a stream early (its task goes on, as when an HTTP client
  hangs up); `system/shutdown` ends the session; heartbeats are ignored;
- `GetExtendedAgentCard` answers the card in-band, whatever the roster.
The end of stdin (or SIGTERM) stops every turn as a server that stops does (a working
task ends failed, one waiting for input stays), answers what was asked, then exits.

A frame larger than `maxBodyBytes` is skipped and answered with an error; a header
that cannot be read ends the session (the stream cannot be resynchronised). Writes only
frames to its frames descriptor, each whole, through one writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from a2a.server import jsonrpc_models
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import build_error_response
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import AgentCard, AgentInterface
from a2a.utils.errors import A2AError, InternalError, InvalidRequestError, MethodNotFoundError

from raven.a2a.auth import Caller
from raven.a2a.card import extended_card
from raven.a2a.mount import A2AMount
from raven.a2a.requests import (
    REQUESTS,
    envelope,
    event_json,
    result_json,
    safe_id,
    typed_params,
)
from raven.a2a.routes import Binding
from raven.deadlines import finish_within
from raven.jsonrpc.headed import FrameError, FrameTooLarge, frame, read_frame
from raven.jsonrpc.stdio import open_stdio
from raven.signals import StopSignals

log = logging.getLogger(__name__)

PROTOCOL = "a2a-stdio"
SESSION_ENV = "A2A_SESSION_ID"
"""The session id the parent gave (a2a-rs#138 makes it required; Raven makes one up)."""
VARIANT = "stdio-json"
SHUTDOWN = "system/shutdown"
ANSWER_S = 10.0
"""Once the turns are stopped, how long what was asked gets to be answered."""
BINDING_ERROR = -32000
"""The binding's own error code (a2a-rs#138: framing and session failures)."""

Write = Callable[[bytes], Awaitable[None]]


class StdioServer:
    """One peer on one pair of pipes, served through `mount`'s method table."""

    def __init__(self, mount: A2AMount, write: Write, session_id: str | None = None) -> None:
        self._mount = mount
        self._binding = Binding(mount)
        self._write = write
        self._writing = asyncio.Lock()
        self._session_id = session_id or str(uuid.uuid4())
        self._requests: set[asyncio.Task[None]] = set()
        self._streams: dict[Any, asyncio.Task[None]] = {}
        self._greeted = False

    async def serve(self, reader: asyncio.StreamReader) -> int:
        """Serve until the end of input or `system/shutdown`; the exit code (2 when the
        input could not be read as frames)."""
        await self._send(self._handshake())
        code = 0
        try:
            while True:
                try:
                    body = await read_frame(reader, self._mount.settings.max_body_bytes)
                except FrameTooLarge as exc:
                    log.warning("A2A stdio: %s", exc)
                    await self._send(_error(None, BINDING_ERROR, str(exc)))
                    continue
                except FrameError as exc:
                    log.error("A2A stdio: %s; ending the session", exc)
                    await self._send(_error(None, BINDING_ERROR, f"Unreadable frame: {exc}"))
                    code = 2
                    break
                if body is None:
                    log.info("A2A stdio: the input ended")
                    break
                if not await self._take(body):
                    break
        finally:
            await self._finish()
        return code

    # -- what comes in ----------------------------------------------------------------

    async def _take(self, body: bytes) -> bool:
        """Handle one frame; False when the session ends with it."""
        try:
            message = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            await self._send(build_error_response(None, jsonrpc_models.JSONParseError()))
            return True
        if isinstance(message, dict) and "type" in message and "jsonrpc" not in message:
            return self._control(message)
        self._greeted = True
        if isinstance(message, dict) and message.get("cancelStream") is True:
            stream = self._streams.get(message.get("id"))
            if stream is not None:
                stream.cancel()
            return True
        if isinstance(message, dict) and message.get("method") == SHUTDOWN:
            await self._send({"jsonrpc": "2.0", "id": message.get("id"), "result": {}})
            return False
        if isinstance(message, dict) and "id" not in message and "method" in message:
            log.info("A2A stdio: ignored a notification (%s)", message.get("method"))
            return True
        self._spawn(message)
        return True

    def _control(self, message: dict[str, Any]) -> bool:
        kind = message.get("type")
        if kind == "heartbeat":
            return True
        if kind == "handshakeAck" and not self._greeted:
            self._greeted = True
            if message.get("accept") is False:
                log.info("A2A stdio: the client declined the session")
                return False
            if message.get("selectVariant", VARIANT) != VARIANT:
                log.error("A2A stdio: the client chose %r", message.get("selectVariant"))
                return False
            return True
        log.warning("A2A stdio: ignored a %r control frame", kind)
        return True

    def _spawn(self, message: Any) -> None:
        request_id = message.get("id") if isinstance(message, dict) else None
        task = asyncio.create_task(self._answer(message, request_id))
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    async def _answer(self, message: Any, request_id: Any) -> None:
        try:
            method, params = envelope(message)
            if method not in REQUESTS:
                raise MethodNotFoundError(message=f"Method not found: {method}")
            typed = typed_params(method, params)
            if method == "GetExtendedAgentCard":
                await self._send(_result(request_id, agent_card_to_dict(self._card())))
                return
            context = self._context(message, method, request_id)
            if self._binding.streams(method):
                if request_id in self._streams:
                    raise InvalidRequestError(message="A stream with this id is still open")
                events = await self._binding.call(method, typed, context, params)
                self._stream(request_id, events)
                return
            result = await self._binding.call(method, typed, context, params)
            await self._send(_result(request_id, result_json(method, typed, result)))
        except A2AError as exc:
            await self._send(build_error_response(safe_id(request_id), exc))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("A2A stdio request failed")
            failed = InternalError(message="Internal error")
            await self._send(build_error_response(safe_id(request_id), failed))

    def _stream(self, request_id: Any, events: Any) -> None:
        task = asyncio.create_task(self._relay(request_id, events))
        self._streams[request_id] = task
        task.add_done_callback(lambda _: self._streams.pop(request_id, None))

    async def _relay(self, request_id: Any, events: Any) -> None:
        """The stream's events, then its end; an error ends it instead. Cancelled (the
        client's `cancelStream`, or the session's end), it ends at once."""
        try:
            async for event in events:
                await self._send(_result(request_id, event_json(event)))
        except asyncio.CancelledError:
            pass
        except A2AError as exc:
            await self._send(build_error_response(safe_id(request_id), exc))
            return
        except Exception:
            log.exception("A2A stdio stream failed")
            failed = InternalError(message="Internal error")
            await self._send(build_error_response(safe_id(request_id), failed))
            return
        finally:
            with contextlib.suppress(Exception):
                await events.aclose()
        await self._send({"jsonrpc": "2.0", "id": request_id, "streamEnd": True})

    # -- the end -----------------------------------------------------------------------

    async def _finish(self) -> None:
        """End every stream, stop every turn (which settles the sends waiting on them),
        and answer what was asked."""
        for stream in list(self._streams.values()):
            stream.cancel()
        await self._mount.aclose()
        await finish_within([*self._requests, *self._streams.values()], ANSWER_S)

    # -- what goes out -----------------------------------------------------------------

    async def _send(self, message: dict[str, Any]) -> None:
        data = frame(message)
        async with self._writing:
            try:
                await self._write(data)
            except (BrokenPipeError, ConnectionResetError):
                log.info("A2A stdio: the peer stopped reading")

    def _handshake(self) -> dict[str, Any]:
        return {
            "type": "handshake",
            "protocol": PROTOCOL,
            "protocolVersion": "1.0",
            "sessionId": self._session_id,
            "supportedVariants": [VARIANT],
            "features": ["streaming"],
            "pid": os.getpid(),
        }

    def _card(self) -> AgentCard:
        """The card, as this binding serves it: one STDIO interface and no token."""
        card = self._mount.card("stdio")
        del card.supported_interfaces[:]
        card.supported_interfaces.append(
            AgentInterface(url="stdio", protocol_binding="STDIO", protocol_version="1.0")
        )
        card.security_schemes.clear()
        del card.security_requirements[:]
        card.capabilities.extended_agent_card = True
        roster = self._mount.roster
        return extended_card(card, roster) if roster else card

    def _context(self, message: dict[str, Any], method: str, request_id: Any) -> ServerCallContext:
        """The peer is the operator; service parameters (`serviceParams`) stand for the
        headers HTTP would carry, and A2A-Version is 1.0 unless they say otherwise."""
        given = message.get("serviceParams")
        headers = {"a2a-version": "1.0"}
        if isinstance(given, dict):
            headers |= {str(k).lower(): str(v) for k, v in given.items()}
        state = {"headers": headers, "method": method, "request_id": request_id}
        return ServerCallContext(user=Caller(self._mount.owner), state=state)


def _result(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _error(request_id: Any, code: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}


async def serve_stdio(mount: A2AMount, frames_fd: int) -> int:
    """Serve `mount` on stdin and `frames_fd` until the end of input, `system/shutdown`
    or SIGTERM/SIGHUP/SIGINT; the exit code (128 + the signal's number after one)."""
    await mount.start()
    reader, write = await open_stdio(0, frames_fd)
    server = StdioServer(mount, write, os.environ.get(SESSION_ENV) or None)
    log.info("raven a2a stdio started (pid %d)", os.getpid())
    serving = asyncio.create_task(server.serve(reader))
    with StopSignals(lambda _: serving.cancel()) as signals:
        try:
            code = await serving
        except asyncio.CancelledError:
            code = 0
    return signals.exit_code or code
