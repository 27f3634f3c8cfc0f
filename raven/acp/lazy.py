"""The ACP dispatcher `raven acp` starts with: answers `initialize` at once, loads the
full server (and with it the engine) only when a request needs it.

Editors start `raven acp` for every window; most of its start-up is importing the
engine, so the handshake must not wait for it. Never answers anything but
`initialize` itself, and hands `initialize` to the full server too once it exists.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from raven.acp.handshake import initialize_result
from raven.jsonrpc import INVALID_REQUEST, Connection, RpcError

if TYPE_CHECKING:
    from raven.acp.server import AcpServer
    from raven.engine import Runtime

log = logging.getLogger(__name__)

INITIALIZE = "initialize"


class LazyServer:
    """A `Dispatcher` in front of `AcpServer`, which it builds on the first other request."""

    def __init__(self, runtime_factory: Callable[[], Runtime]) -> None:
        self._runtime_factory = runtime_factory
        self._connection: Connection | None = None
        self._initialize: dict[str, Any] | None = None
        self._server: AcpServer | None = None

    def attach(self, connection: Connection) -> None:
        self._connection = connection

    async def handle_request(self, method: str, params: dict[str, Any]) -> Any:
        if method == INITIALIZE and self._server is None:
            self._initialize = params
            return initialize_result(params)
        if self._server is None and self._initialize is None:
            raise RpcError(INVALID_REQUEST, "Not initialized: send initialize first")
        return await self.server().handle_request(method, params)

    async def handle_notification(self, method: str, params: dict[str, Any]) -> None:
        if self._server is not None:
            await self._server.handle_notification(method, params)
        else:
            log.debug("ignored notification %s before any session", method)

    def server(self) -> AcpServer:
        """The full server, built (and told of the handshake) on first use."""
        if self._server is None:
            from raven.acp.server import AcpServer

            server = AcpServer(self._runtime_factory)
            assert self._connection is not None
            server.attach(self._connection)
            if self._initialize is not None:
                server.accept_initialize(self._initialize)
            self._server = server
        return self._server

    async def shutdown(self) -> None:
        if self._server is not None:
            await self._server.shutdown()

    async def aclose(self) -> None:
        if self._server is not None:
            await self._server.aclose()
