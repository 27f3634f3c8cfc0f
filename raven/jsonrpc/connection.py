"""One JSON-RPC peer: reads frames, dispatches each inbound request in its own task,
matches responses to outbound requests, and writes every frame through one queue.

Every inbound request gets exactly one response, on every path. Notifications
are never answered. Knows no method names.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from raven.jsonrpc.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    RpcError,
)
from raven.jsonrpc.framing import FrameReader, FrameTooLarge
from raven.jsonrpc.stdio import WriteFn

log = logging.getLogger(__name__)

CANCEL_REQUEST_METHOD = "$/cancel_request"
FLUSH_TIMEOUT_S = 1.0

RequestId = int | str


class ConnectionClosed(Exception):
    """The peer went away before answering."""


class Dispatcher(Protocol):
    """What serves the requests and notifications a peer sends."""

    async def handle_request(self, method: str, params: dict[str, Any]) -> Any:
        """The result; raise `RpcError` to answer with an error."""
        ...

    async def handle_notification(self, method: str, params: dict[str, Any]) -> None: ...


Outbound = Callable[[dict[str, Any]], dict[str, Any]]
"""A last pass over every message before it is written (e.g. redaction)."""
Dumps = Callable[[dict[str, Any]], bytes]
"""How a message becomes its frame's compact UTF-8 JSON (without the line end)."""


def std_dumps(message: dict[str, Any]) -> bytes:
    """The standard library's JSON: what every face has loaded before its first frame."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


class Connection:
    def __init__(
        self,
        reader: FrameReader,
        write: WriteFn,
        dispatcher: Dispatcher,
        outbound: Outbound | None = None,
        dumps: Dumps = std_dumps,
    ) -> None:
        self._reader = reader
        self._write = write
        self._dispatcher = dispatcher
        self._outbound = outbound
        self._dumps = dumps
        self._outbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._outbox_bytes = 0
        self._pending: dict[RequestId, asyncio.Future[Any]] = {}
        self._ids = itertools.count()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self._writer: asyncio.Task[None] | None = None

    async def serve(self) -> None:
        """Read frames until end of stream; handlers may still be running when this returns."""
        self._writer = asyncio.create_task(self._drain_outbox())
        try:
            while (frame := await self._reader.read()) is not None:
                self._receive(frame)
        finally:
            self._closed = True
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionClosed("the peer closed the connection"))
            self._pending.clear()

    async def finish(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for running handlers, cancel the rest, flush the outbox."""
        if self._tasks:
            _, late = await asyncio.wait(list(self._tasks), timeout=timeout_s)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=FLUSH_TIMEOUT_S)
        self._outbox.put_nowait(None)
        if self._writer is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._writer, FLUSH_TIMEOUT_S)

    def close(self) -> None:
        """Stop writing at once (what is queued is let go) and end the writer task, so
        nothing of the connection outlives it; `finish` first flushes."""
        self._closed = True
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()

    @property
    def closed(self) -> bool:
        """The peer is gone: nothing sent reaches it any more."""
        return self._closed

    @property
    def backlog(self) -> int:
        """Frames queued and not yet written: how far the peer has fallen behind."""
        return self._outbox.qsize()

    @property
    def backlog_bytes(self) -> int:
        """The size of the frames queued and not yet written."""
        return self._outbox_bytes

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Queue a notification; frames leave in the order they were queued."""
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def encode_notification(self, method: str, params: dict[str, Any]) -> bytes:
        """The frame `notify` would queue (its outbound pass applied), for sending one
        notification to many peers that share that pass with `send_encoded`."""
        return self._encode({"jsonrpc": "2.0", "method": method, "params": params})

    def send_encoded(self, data: bytes) -> None:
        """Queue a frame `encode_notification` made."""
        self._outbox_bytes += len(data)
        self._outbox.put_nowait(data)

    async def request(self, method: str, params: dict[str, Any], timeout_s: float) -> Any:
        """Send a request and wait at most `timeout_s` for its result.

        Raises `RpcError` for an error response, `ConnectionClosed` if the peer goes
        away and `TimeoutError`. If the wait is cancelled the peer is told with
        `$/cancel_request`.
        """
        if self._closed:
            raise ConnectionClosed("the connection is closed")
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        try:
            async with asyncio.timeout(timeout_s):
                return await future
        except (asyncio.CancelledError, TimeoutError):
            if not self._closed:
                self.notify(CANCEL_REQUEST_METHOD, {"requestId": request_id})
            raise
        finally:
            self._pending.pop(request_id, None)

    def _send(self, message: dict[str, Any]) -> None:
        self.send_encoded(self._encode(message))

    def _encode(self, message: dict[str, Any]) -> bytes:
        if self._outbound is not None:
            message = self._outbound(message)
        return self._dumps(message) + b"\n"

    async def _drain_outbox(self) -> None:
        while (data := await self._outbox.get()) is not None:
            self._outbox_bytes -= len(data)
            try:
                await self._write(data)
            except (ConnectionError, OSError) as exc:
                log.warning("cannot write to the peer: %s", exc)
                return

    def _receive(self, frame: bytes | FrameTooLarge) -> None:
        if isinstance(frame, FrameTooLarge):
            log.warning("refused a frame of %d bytes (over the limit)", frame.size)
            self._error(None, RpcError(INVALID_REQUEST, f"Frame too large ({frame.size} bytes)"))
            return
        if not frame.strip():
            return
        try:
            message = json.loads(frame)
        except (ValueError, UnicodeDecodeError) as exc:
            log.warning("invalid JSON from the peer: %s", exc)
            self._error(None, RpcError(PARSE_ERROR, "Parse error: invalid JSON"))
            return
        except RecursionError:
            log.warning("refused a frame of %d bytes: JSON nested too deeply", len(frame))
            self._error(None, RpcError(PARSE_ERROR, "Parse error: JSON nested too deeply"))
            return
        if not isinstance(message, dict):
            self._error(None, RpcError(INVALID_REQUEST, "Invalid request: not a JSON object"))
            return
        if "method" in message:
            self._inbound(message)
        elif "result" in message or "error" in message:
            self._resolve(message)
        else:
            self._error(None, RpcError(INVALID_REQUEST, "Invalid request: no method"))

    def _inbound(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        has_id = "id" in message
        request_id = message.get("id")
        if has_id and (isinstance(request_id, bool) or not isinstance(request_id, int | str)):
            self._error(None, RpcError(INVALID_REQUEST, "Invalid request: bad id"))
            return
        if not isinstance(method, str) or message.get("jsonrpc") != "2.0":
            # An invalid request is answered even without an id (JSON-RPC 2.0, section 5).
            self._error(request_id, RpcError(INVALID_REQUEST, "Invalid request"))
            return
        params = message.get("params", {})
        if params is None:
            params = {}
        if not has_id:
            if isinstance(params, dict):
                self._spawn(self._notification(method, params))
            return
        if not isinstance(params, dict):
            self._error(request_id, RpcError(INVALID_PARAMS, "Invalid params: must be an object"))
            return
        assert isinstance(request_id, int | str)
        self._spawn(self._request(request_id, method, params))

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _request(self, request_id: RequestId, method: str, params: dict[str, Any]) -> None:
        try:
            result = await self._dispatcher.handle_request(method, params)
        except RpcError as exc:
            self._error(request_id, exc)
        except asyncio.CancelledError:
            self._error(request_id, RpcError(REQUEST_CANCELLED, "Request cancelled"))
            raise
        except Exception:
            log.exception("request %s failed", method)
            self._error(request_id, RpcError(INTERNAL_ERROR, "Internal error"))
        else:
            try:  # encoded before anything is queued
                self._send({"jsonrpc": "2.0", "id": request_id, "result": result})
            except (TypeError, ValueError):  # what the handler returned is not JSON
                log.exception("the result of request %s cannot be sent", method)
                self._error(request_id, RpcError(INTERNAL_ERROR, "Internal error"))

    async def _notification(self, method: str, params: dict[str, Any]) -> None:
        try:
            await self._dispatcher.handle_notification(method, params)
        except Exception:
            log.exception("notification %s failed", method)

    def _resolve(self, message: dict[str, Any]) -> None:
        future = self._pending.get(message.get("id"))  # type: ignore[arg-type]
        if future is None or future.done():
            log.info("ignored a response to an unknown request id %r", message.get("id"))
            return
        if "error" in message:
            future.set_exception(RpcError.from_wire(message["error"]))
        else:
            future.set_result(message.get("result"))

    def _error(self, request_id: RequestId | None, error: RpcError) -> None:
        self._send({"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()})
