"""A2A's JSON-RPC and HTTP+JSON bindings on aiohttp: the card route, the RPC route, and
the REST paths under it (`POST {path}/message:send`, `GET {path}/tasks/{id}`, …).

Checks, in order: bearer token (before reading the body), body size, JSON,
A2A-Version, envelope and method (JSON-RPC) or path (REST), params (the SDK's
REQUIRED fields too); then hands the typed request to the task service through one
table, method by method, whichever binding it came by. A JSON-RPC notification (no
`id`) gets HTTP 204 and no body. Errors use the SDK's types and codes (REST: its
error payload and HTTP status); exception text and the token never reach a caller
or a log line. The card advertises `publicUrl` or the listener's own address,
never what a request's Host header claims.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from email.utils import formatdate
from typing import Any

from a2a import types as a2a_types
from a2a.extensions.common import get_requested_extensions
from a2a.server import jsonrpc_models
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import build_error_response
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.utils import constants
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    TaskNotCancelableError,
)
from a2a.utils.proto_utils import (
    parse_params,
    validate_proto_required_fields,
)
from a2a.utils.version_validator import validate_version
from aiohttp import web
from google.protobuf.json_format import ParseError

from raven.a2a.auth import Caller, authenticate
from raven.a2a.mount import A2AMount
from raven.a2a.parts import check_parts, sent_data
from raven.a2a.requests import (
    REQUESTS,
    check_states,
    complete,
    envelope,
    event_json,
    result_json,
    safe_id,
    typed_params,
)
from raven.config import A2AServerConfig
from raven.origins import is_loopback

log = logging.getLogger(__name__)

KEEPALIVE_S = 15.0
UNAUTHORIZED = "Unauthorized: a valid bearer token is required"
AI_CATALOG_PATH = "/.well-known/ai-catalog.json"
A2A_CARD_TYPE = "application/a2a-agent-card+json"
CARD_MAX_AGE_S = 300
"""How long a client may keep the agent card (it changes only with the config)."""
_READ_CHUNK = 65536
_TASK = "{id:[^/:]+}"
_PUSH_CONFIG = f"/tasks/{_TASK}/pushNotificationConfigs/{{push:[^/]+}}"
_REST: tuple[tuple[str, str, str], ...] = (
    ("POST", "/message:send", "SendMessage"),
    ("POST", "/message:stream", "SendStreamingMessage"),
    ("GET", f"/tasks/{_TASK}", "GetTask"),
    ("GET", "/tasks", "ListTasks"),
    ("POST", f"/tasks/{_TASK}:cancel", "CancelTask"),
    ("GET", f"/tasks/{_TASK}:subscribe", "SubscribeToTask"),
    ("POST", f"/tasks/{_TASK}:subscribe", "SubscribeToTask"),
    ("GET", "/extendedAgentCard", "GetExtendedAgentCard"),
    ("POST", f"/tasks/{_TASK}/pushNotificationConfigs", "CreateTaskPushNotificationConfig"),
    ("GET", f"/tasks/{_TASK}/pushNotificationConfigs", "ListTaskPushNotificationConfigs"),
    ("GET", _PUSH_CONFIG, "GetTaskPushNotificationConfig"),
    ("DELETE", _PUSH_CONFIG, "DeleteTaskPushNotificationConfig"),
)
"""The HTTP+JSON binding's paths (under the RPC path) and the method each one is."""
_REST_BODY = frozenset({"SendMessage", "SendStreamingMessage", "CreateTaskPushNotificationConfig"})
"""Methods whose request is the body; the others' come from the path and the query."""
_REST_STATUS: dict[type[A2AError], int] = {
    TaskNotCancelableError: 409,
    ContentTypeNotSupportedError: 415,
}
"""HTTP statuses where the spec's table (§5.4) says otherwise than the SDK's mapping (400)."""


@validate_version(constants.PROTOCOL_VERSION_1_0)
async def _check_version(context: ServerCallContext) -> None:
    """Raises the SDK's VersionNotSupportedError unless the request speaks A2A 1.x."""


def add_a2a_routes(app: web.Application, mounts: Sequence[A2AMount]) -> None:
    """Serve each agent of `mounts`: JSON-RPC at its path and HTTP+JSON under it, and a
    served agent's card under it too; the first one's card at the well-known path, and
    the catalog of them all at its own (`AI_CATALOG_PATH`)."""
    bindings = [Binding(mount) for mount in mounts]
    app.router.add_get(constants.AGENT_CARD_WELL_KNOWN_PATH, bindings[0].card)
    app.router.add_get(AI_CATALOG_PATH, functools.partial(_catalog, mounts))
    for binding in bindings:
        mount = binding.mount
        if mount.agent is not None:
            card_path = mount.path + constants.AGENT_CARD_WELL_KNOWN_PATH
            app.router.add_get(card_path, binding.card)
        app.router.add_post(mount.path, binding.rpc)
        slashed = mount.path.rstrip("/") + "/"
        if slashed != mount.path:  # a client given a base URL posts to `/a2a/`
            app.router.add_post(slashed, binding.rpc)
        base = slashed.rstrip("/")
        for verb, path, method in _REST:
            app.router.add_route(verb, base + path, functools.partial(binding.rest, method))

    async def start(_: web.Application) -> None:
        for mount in mounts:
            await mount.start()

    app.on_startup.append(start)


async def _catalog(mounts: Sequence[A2AMount], request: web.Request) -> web.StreamResponse:
    """The agents served here, as an AI Catalog (A2A's multi-agent discovery, a2a-spec
    PR #2240): one entry per agent, naming where its card is."""
    entries = []
    for mount in mounts:
        name = mount.agent.name if mount.agent is not None else "raven"
        card = constants.AGENT_CARD_WELL_KNOWN_PATH
        if mount.agent is not None:
            card = mount.path + card
        url = advertised(request, mount.settings, card)
        entries.append({"identifier": f"urn:raven:a2a:{name}", "type": A2A_CARD_TYPE, "url": url})
    body = {"specVersion": "1.0", "host": {"displayName": "Raven"}, "entries": entries}
    return web.Response(
        text=json.dumps(body, ensure_ascii=False),
        content_type="application/json",
        headers={"Cache-Control": f"max-age={CARD_MAX_AGE_S}", "Vary": "Host"},
    )


Unary = Callable[[Any, ServerCallContext, Any], Awaitable[Any]]
Streaming = Callable[[Any, ServerCallContext, Any], Awaitable[AsyncIterator[Any]]]


class Binding:
    def __init__(self, mount: A2AMount) -> None:
        self.mount = mount
        self._card_since = formatdate(usegmt=True)
        """The card changes only with the config, which is read when the server starts."""
        service = mount.service
        self._unary: dict[str, Unary] = {
            "SendMessage": service.send,
            "GetTask": lambda r, c, _: service.get(r.id, c, r),
            "ListTasks": lambda r, c, _: service.list_tasks(r, c),
            "CancelTask": lambda r, c, _: service.cancel(r.id, c),
            "GetExtendedAgentCard": self._extended_card,
            "CreateTaskPushNotificationConfig": lambda r, c, _: service.create_push(r, c),
            "GetTaskPushNotificationConfig": lambda r, c, _: service.get_push(r, c),
            "ListTaskPushNotificationConfigs": lambda r, c, _: service.list_push(r, c),
            "DeleteTaskPushNotificationConfig": lambda r, c, _: service.delete_push(r, c),
        }
        self._streaming: dict[str, Streaming] = {
            "SendStreamingMessage": service.stream,
            "SubscribeToTask": lambda r, c, _: service.subscribe(r.id, c),
        }

    def _rpc_url(self, request: web.Request) -> str:
        return advertised(request, self.mount.settings, self.mount.path)

    async def card(self, request: web.Request) -> web.StreamResponse:
        body = agent_card_to_dict(self.mount.card(self._rpc_url(request)))
        text = json.dumps(body, ensure_ascii=False)
        etag = 'W/"' + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest() + '"'
        # It names the URL as the caller spelled the host (`rpc_url`): cached per Host.
        headers = {
            "ETag": etag,
            "Cache-Control": f"max-age={CARD_MAX_AGE_S}",
            "Vary": "Host",
            "Last-Modified": self._card_since,
        }
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers=headers)
        return web.Response(text=text, content_type="application/json", headers=headers)

    async def rpc(self, request: web.Request) -> web.StreamResponse:
        caller = authenticate(
            request.headers.get("Authorization"), self.mount.settings.token, self.mount.owner
        )
        if caller is None:
            error = {"code": -32000, "message": UNAUTHORIZED}
            return _json(
                {"jsonrpc": "2.0", "id": None, "error": error},
                status=401,
                headers={"WWW-Authenticate": 'Bearer realm="a2a"'},
            )
        body = await _read_limited(request, self.mount.settings.max_body_bytes)
        if body is None:
            limit = self.mount.settings.max_body_bytes
            return _json(
                build_error_response(
                    None,
                    InvalidRequestError(message=f"Payload too large: the limit is {limit} bytes"),
                ),
                status=413,
            )
        try:
            message = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return _json(build_error_response(None, jsonrpc_models.JSONParseError()))
        if _is_notification(message):
            # JSON-RPC 2.0: a notification is never answered. A2A defines none, so none runs.
            log.info("ignored an A2A notification (%s)", message.get("method"))
            return web.Response(status=204)
        request_id = message.get("id") if isinstance(message, dict) else None
        try:
            method, params = envelope(message)
            context = _call_context(request, caller, method, request_id)
            if method == "GetExtendedAgentCard":  # the one answer that names the URL
                context.state["rpc_url"] = self._rpc_url(request)
            if method not in REQUESTS:
                raise MethodNotFoundError(message=f"Method not found: {method}")
            # As the SDK's JSON-RPC dispatcher: an unknown method and params that do not
            # parse are JSON-RPC's errors, whatever the version; then the version.
            typed = typed_params(method, params)
            await _check_version(context)
            data = self.checked(typed, params)
            if method in self._streaming:
                events = await self._streaming[method](typed, context, data)
                rid = safe_id(request_id)
                return await self._stream(
                    request,
                    events,
                    lambda event: {"jsonrpc": "2.0", "id": request_id, "result": event_json(event)},
                    lambda exc: build_error_response(rid, exc),
                )
            result = await self._unary[method](typed, context, data)
            return _json(
                {"jsonrpc": "2.0", "id": request_id, "result": result_json(method, typed, result)}
            )
        except A2AError as exc:
            return _json(build_error_response(safe_id(request_id), exc))
        except Exception:
            log.exception("A2A request failed")
            return _json(
                build_error_response(safe_id(request_id), InternalError(message="Internal error"))
            )

    async def rest(self, method: str, request: web.Request) -> web.StreamResponse:
        """One HTTP+JSON request for `method`, through the same table as JSON-RPC."""
        caller = authenticate(
            request.headers.get("Authorization"), self.mount.settings.token, self.mount.owner
        )
        if caller is None:
            unauthorized = {"code": 401, "status": "UNAUTHENTICATED", "message": UNAUTHORIZED}
            return _json(
                {"error": unauthorized},
                status=401,
                headers={"WWW-Authenticate": 'Bearer realm="a2a"'},
            )
        try:
            context = _call_context(request, caller, method, None)
            if method == "GetExtendedAgentCard":
                context.state["rpc_url"] = self._rpc_url(request)
            await _check_version(context)
            params: Any = {}
            if method in _REST_BODY:
                _check_content_type(request)
                limit = self.mount.settings.max_body_bytes
                body = await _read_limited(request, limit)
                if body is None:
                    too_large = f"Payload too large: the limit is {limit} bytes"
                    payload = build_rest_error_payload(InvalidRequestError(message=too_large))
                    return _json(payload, status=413)
                try:
                    params = json.loads(body)
                except (ValueError, UnicodeDecodeError, RecursionError):
                    raise InvalidRequestError(message="The body is not valid JSON") from None
                if not isinstance(params, dict):
                    raise InvalidRequestError(message="The body must be a JSON object")
            typed, data = self._typed(method, params, request)
            if method in self._streaming:
                events = await self._streaming[method](typed, context, data)
                return await self._stream(request, events, event_json, build_rest_error_payload)
            result = await self._unary[method](typed, context, data)
            return _json({} if result is None else result_json(method, typed, result))
        except A2AError as exc:
            payload = build_rest_error_payload(exc)
            status = _REST_STATUS.get(type(exc), payload["error"]["code"])
            payload["error"]["code"] = status
            return _json(payload, status=status)
        except Exception:
            log.exception("A2A request failed")
            failed = build_rest_error_payload(InternalError(message="Internal error"))
            return _json(failed, status=500)

    def _typed(
        self, method: str, params: dict[str, Any], request: web.Request
    ) -> tuple[Any, list[Any] | None]:
        """The method's request from a REST request's body, path and query, checked; with
        the data parts' JSON as sent."""
        typed = typed_params(method, params)
        _from_path(typed, request)
        return typed, self.checked(typed, params)

    def checked(self, typed: Any, params: dict[str, Any] | None = None) -> list[Any] | None:
        """Raises unless `typed` has the SDK's REQUIRED fields and a message Raven takes;
        the data parts' JSON as sent, when the request came as JSON (`params`)."""
        if not complete(typed):
            validate_proto_required_fields(typed)  # the SDK's own error, naming the field
        if isinstance(typed, a2a_types.SendMessageRequest):
            check_parts(typed.message, self.mount.settings)
            return sent_data(params) if params is not None else None
        return None

    def streams(self, method: str) -> bool:
        """Whether `method` answers with a stream of events."""
        return method in self._streaming

    async def call(
        self,
        method: str,
        typed: Any,
        context: ServerCallContext,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """`method` for a request another binding (gRPC, stdio) typed (from JSON `params`,
        if it came so): checked, then the service's answer (the task, the page, the card),
        or for a streaming method its events."""
        await _check_version(context)
        data = self.checked(typed, params)
        if method in self._streaming:
            return await self._streaming[method](typed, context, data)
        return await self._unary[method](typed, context, data)

    async def _extended_card(self, _: Any, context: ServerCallContext, __: Any) -> Any:
        return self.mount.extended_card(context.state["rpc_url"])

    async def _stream(
        self,
        request: web.Request,
        events: AsyncIterator[Any],
        frame: Callable[[Any], Any],
        failure: Callable[[A2AError], Any],
    ) -> web.StreamResponse:
        """The events as server-sent events, each `frame(event)`; an error after the
        first as an `error` event of `failure(error)`."""
        first = await anext(events)
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        lock = asyncio.Lock()

        async def send(chunk: bytes) -> None:
            async with lock:
                await response.write(chunk)

        async def keepalive() -> None:
            while True:
                await asyncio.sleep(KEEPALIVE_S)
                await send(b": ping\n\n")

        pinger = asyncio.create_task(keepalive())
        try:
            event = first
            while True:
                data = json.dumps(frame(event), ensure_ascii=False).encode()
                await send(b"data: " + data + b"\n\n")
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    break
        except (ConnectionResetError, asyncio.CancelledError):
            log.info("A2A stream: the client went away")
        except A2AError as exc:
            await _send_error(send, failure(exc))
        except Exception:
            log.exception("A2A stream failed")
            await _send_error(send, failure(InternalError(message="Internal error")))
        finally:
            pinger.cancel()
            with contextlib.suppress(Exception):
                await events.aclose()  # type: ignore[attr-defined]
            with contextlib.suppress(ConnectionResetError):
                await response.write_eof()
        return response


def _check_content_type(request: web.Request) -> None:
    """A body that says it is anything but JSON is refused as the spec says (415); one
    that says nothing is read as JSON."""
    if "Content-Type" not in request.headers:
        return
    kind = request.content_type
    if kind != "application/json" and not kind.endswith("+json"):
        raise ContentTypeNotSupportedError(
            message=f"The body must be JSON (application/json), not {kind[:100]}"
        )


def _from_path(typed: Any, request: web.Request) -> None:
    """What a REST path and query say of the request: the task id, the push config's id,
    the query's fields (`historyLength`, `pageSize`, `status`, …)."""
    if request.method == "GET" and request.query:
        if isinstance(typed, a2a_types.ListTasksRequest):
            check_states(request.query.getall("status", []))
        try:
            parse_params(_Query(request.query), typed)  # type: ignore[arg-type]
        except ParseError as exc:
            raise InvalidParamsError(message=f"Invalid query: {exc}") from None
    task, push = request.match_info.get("id"), request.match_info.get("push")
    fields = typed.DESCRIPTOR.fields_by_name
    if push is not None:
        typed.task_id, typed.id = task, push
    elif task is not None:
        setattr(typed, "task_id" if "task_id" in fields else "id", task)


class _Query:
    """aiohttp's query as the SDK's `parse_params` reads one: Starlette's `QueryParams`,
    of which it uses `keys` and `getlist` (Starlette is not a dependency of Raven)."""

    def __init__(self, query: Any) -> None:
        self._query = query

    def keys(self) -> Any:
        return self._query.keys()

    def getlist(self, key: str) -> list[str]:
        return list(self._query.getall(key))


async def _send_error(send: Callable[[bytes], Awaitable[None]], error: dict[str, Any]) -> None:
    with contextlib.suppress(ConnectionResetError):
        await send(b"event: error\ndata: " + json.dumps(error).encode() + b"\n\n")


async def _read_limited(request: web.Request, limit: int) -> bytes | None:
    """The body, or None when it is longer than `limit`."""
    declared = request.content_length
    if declared is not None and declared > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.read(_READ_CHUNK):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _is_notification(message: Any) -> bool:
    """A valid JSON-RPC request without an id; an invalid one is answered with id null."""
    return (
        isinstance(message, dict)
        and "id" not in message
        and message.get("jsonrpc") == "2.0"
        and isinstance(message.get("method"), str)
    )


def _call_context(
    request: web.Request, caller: Caller, method: str, request_id: Any
) -> ServerCallContext:
    headers = {k.lower(): v for k, v in request.headers.items() if k.lower() != "authorization"}
    return ServerCallContext(
        user=caller,
        state={"headers": headers, "method": method, "request_id": request_id},
        requested_extensions=get_requested_extensions(request.headers.getall("A2A-Extensions", [])),
    )


def advertised(request: web.Request, settings: A2AServerConfig, path: str) -> str:
    """The URL to advertise for `path` (an agent's RPC path, its card's): `publicUrl` +
    path, else the listener's own address.

    A loopback listener is named as the caller named it (`127.0.0.1` or `localhost`,
    so a client sees the interface on the origin it fetched the card from), when
    the Host header names this listener; otherwise `localhost`. The Host header is
    never taken for anything else: a caller could make the card point elsewhere.
    """
    if settings.public_url:
        return settings.public_url + path
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    if not sockname:
        return f"http://localhost{path}"
    host, port = str(sockname[0]), int(sockname[1])
    if is_loopback(host):
        host = _spelling(request.headers.get("Host", ""), host, port) or "localhost"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}{path}"


def _spelling(host_header: str, listener: str, port: int) -> str | None:
    """The host of `host_header` when it names this loopback listener (`localhost` or its
    own address, with its port), else None."""
    name, _, given = host_header.lower().rpartition(":")
    bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    return name if given == str(port) and bare in ("localhost", listener) else None


_ENCODER = json.JSONEncoder(ensure_ascii=False)
"""`json.dumps(..., ensure_ascii=False)` without making an encoder on every call."""


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        text=_ENCODER.encode(body),
        status=status,
        content_type="application/json",
        headers=headers,
    )
