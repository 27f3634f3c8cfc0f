"""A2A's gRPC binding: the SDK's generated service, through its `GrpcHandler`, on a port
of its own, over the same method table, checks and task service as the HTTP bindings.

The bearer token travels in the call's metadata (`authorization`) and is checked before
the request is even decoded; a call without it ends UNAUTHENTICATED, and a request that
does not decode ends INVALID_ARGUMENT. Loaded only when
`a2a.server.grpcPort` is set (the `grpc` extra brings grpcio); never logs the token.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import grpc.aio
from a2a.extensions.common import HTTP_EXTENSION_HEADER, get_requested_extensions
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.grpc_handler import GrpcHandler, GrpcServerCallContextBuilder
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import a2a_pb2_grpc
from a2a.utils.errors import (
    A2A_ERROR_REASONS,
    A2AError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from a2a.utils.grpc_status import status_to_grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from raven.a2a.auth import OPERATOR, Caller, authenticate
from raven.a2a.mount import A2AMount
from raven.a2a.routes import UNAUTHORIZED, Binding

log = logging.getLogger(__name__)

STOP_GRACE_S = 5.0


class GrpcServer:
    """The gRPC binding of `mount`, listening on `host:port` once started."""

    def __init__(self, mount: A2AMount, host: str, port: int, http_url: str) -> None:
        self._mount = mount
        self._server = grpc.aio.server(interceptors=[_Bearer(mount.settings.token)])
        context = _Context(mount.settings.token, mount.owner)
        handler = GrpcHandler(_Service(Binding(mount), http_url), context)
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(handler, self._server)
        shown = f"[{host}]" if ":" in host else host
        self._port = self._server.add_insecure_port(f"{shown}:{port}")
        self.target = f"{shown}:{self._port}"

    async def start(self) -> None:
        await self._server.start()
        self._mount.grpc_target = self.target

    async def stop(self) -> None:
        self._mount.grpc_target = None
        await self._server.stop(STOP_GRACE_S)


def _caller(metadata: Any, token: str, owner: str = OPERATOR) -> Caller | None:
    given = next((v for k, v in metadata or () if k.lower() == "authorization"), None)
    return authenticate(given if isinstance(given, str) else None, token, owner)


class _Bearer(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuses a call without the token before its request is read."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        details: Any,
    ) -> Any:
        handler = await continuation(details)
        if handler is None:
            return handler
        if _caller(details.invocation_metadata, self._token) is not None:
            return _decoding(handler)
        return _refusing(handler)


def _refusing(handler: Any) -> Any:
    """`handler`'s kind of method, ending UNAUTHENTICATED without decoding the request."""

    async def refuse(request: Any, context: Any) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHORIZED)

    async def refuse_stream(request: Any, context: Any) -> AsyncIterator[Any]:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHORIZED)
        yield  # never reached: abort raises

    def ignore(_: bytes) -> None:
        return None

    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            refuse_stream, request_deserializer=ignore, response_serializer=_nothing
        )
    return grpc.unary_unary_rpc_method_handler(
        refuse, request_deserializer=ignore, response_serializer=_nothing
    )


def _nothing(_: Any) -> bytes:
    return b""


class _Undecodable:
    """A request whose bytes are not a message of the method's type."""


UNDECODABLE = (
    "the request is not a valid protobuf message for this method "
    "(malformed, truncated, of another type, or nested too deep)"
)


def _decoding(handler: Any) -> Any:
    """`handler` with a request that does not decode ending INVALID_ARGUMENT, saying so:
    grpc's own answer would be UNKNOWN, naming a Python class to the peer."""
    decode = handler.request_deserializer

    def safe(data: bytes) -> Any:
        try:
            return decode(data)
        except Exception as exc:  # DecodeError, RecursionError, …: the peer's bytes
            log.info("a2a grpc: a request did not decode: %s", type(exc).__name__)
            return _Undecodable()

    if handler.unary_unary is not None:
        unary = handler.unary_unary

        async def checked(request: Any, context: Any) -> Any:
            if isinstance(request, _Undecodable):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, UNDECODABLE)
            return await unary(request, context)

        return grpc.unary_unary_rpc_method_handler(
            checked, request_deserializer=safe, response_serializer=handler.response_serializer
        )
    if handler.unary_stream is not None:
        stream = handler.unary_stream

        async def checked_stream(request: Any, context: Any) -> AsyncIterator[Any]:
            if isinstance(request, _Undecodable):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, UNDECODABLE)
            async for item in stream(request, context):
                yield item

        return grpc.unary_stream_rpc_method_handler(
            checked_stream,
            request_deserializer=safe,
            response_serializer=handler.response_serializer,
        )
    return handler  # A2A has no client-streaming method


class _Context(GrpcServerCallContextBuilder):  # type: ignore[misc]
    """A call's context as the HTTP bindings make it: the caller, and the metadata as
    headers (the token left out), where the version check reads `a2a-version`."""

    def __init__(self, token: str, owner: str) -> None:
        self._token = token
        self._owner = owner

    def build(self, context: grpc.aio.ServicerContext) -> ServerCallContext:
        metadata = context.invocation_metadata() or ()
        caller = _caller(metadata, self._token, self._owner)
        assert caller is not None  # `_Bearer` let the call in
        headers = {
            k.lower(): v for k, v in metadata if isinstance(v, str) and k.lower() != "authorization"
        }
        extensions = [v for k, v in headers.items() if k == HTTP_EXTENSION_HEADER.lower()]
        return ServerCallContext(
            user=caller,
            state={"headers": headers, "grpc_context": context},
            requested_extensions=get_requested_extensions(extensions),
        )


_UNIMPLEMENTED = (
    UnsupportedOperationError,
    VersionNotSupportedError,
)
"""What A2A 1.0 maps to UNIMPLEMENTED (its error table); the SDK's handler says
FAILED_PRECONDITION for them."""


class _Service(RequestHandler):  # type: ignore[misc]
    """The SDK's request-handler interface, answered by the bindings' one method table."""

    def __init__(self, binding: Binding, http_url: str) -> None:
        self._binding = binding
        self._http_url = http_url

    async def _call(self, method: str, params: Any, context: ServerCallContext) -> Any:
        try:
            return await self._binding.call(method, params, context)
        except _UNIMPLEMENTED as exc:
            await _abort_unimplemented(context.state["grpc_context"], exc)

    async def on_message_send(self, params: Any, context: ServerCallContext) -> Any:
        return await self._call("SendMessage", params, context)

    async def on_message_send_stream(
        self, params: Any, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        async for event in await self._call("SendStreamingMessage", params, context):
            yield event

    async def on_get_task(self, params: Any, context: ServerCallContext) -> Any:
        return await self._call("GetTask", params, context)

    async def on_list_tasks(self, params: Any, context: ServerCallContext) -> Any:
        return await self._call("ListTasks", params, context)

    async def on_cancel_task(self, params: Any, context: ServerCallContext) -> Any:
        return await self._call("CancelTask", params, context)

    async def on_subscribe_to_task(
        self, params: Any, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        async for event in await self._call("SubscribeToTask", params, context):
            yield event

    async def on_get_extended_agent_card(self, params: Any, context: ServerCallContext) -> Any:
        context.state["rpc_url"] = self._http_url  # the card names the HTTP bindings' URL
        return await self._call("GetExtendedAgentCard", params, context)

    async def on_create_task_push_notification_config(
        self, params: Any, context: ServerCallContext
    ) -> Any:
        return await self._call("CreateTaskPushNotificationConfig", params, context)

    async def on_get_task_push_notification_config(
        self, params: Any, context: ServerCallContext
    ) -> Any:
        return await self._call("GetTaskPushNotificationConfig", params, context)

    async def on_list_task_push_notification_configs(
        self, params: Any, context: ServerCallContext
    ) -> Any:
        return await self._call("ListTaskPushNotificationConfigs", params, context)

    async def on_delete_task_push_notification_config(
        self, params: Any, context: ServerCallContext
    ) -> Any:
        return await self._call("DeleteTaskPushNotificationConfig", params, context)


async def _abort_unimplemented(context: grpc.aio.ServicerContext, error: A2AError) -> None:
    """End the call UNIMPLEMENTED, its reason in the details as the SDK gives the others."""
    info = error_details_pb2.ErrorInfo(
        reason=A2A_ERROR_REASONS.get(type(error), "UNKNOWN_ERROR"), domain="a2a-protocol.org"
    )
    status = status_pb2.Status(code=grpc.StatusCode.UNIMPLEMENTED.value[0], message=error.message)
    detail = any_pb2.Any()
    detail.Pack(info)
    status.details.append(detail)
    rich = status_to_grpc(status)
    context.set_trailing_metadata(rich.trailing_metadata)
    await context.abort(rich.code, rich.details)
