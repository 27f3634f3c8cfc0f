"""Standalone hosting: the A2A routes on an aiohttp server of their own."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from aiohttp import web

from raven.a2a.mount import A2AMount
from raven.a2a.routes import add_a2a_routes
from raven.config import ConfigError
from raven.heap import settle
from raven.running import forget, record
from raven.signals import until_stopped

log = logging.getLogger(__name__)


async def serve(
    mounts: Sequence[A2AMount],
    host: str,
    port: int,
    announce: Callable[[str, str], None],
    state: Path | None = None,
) -> None:
    """Serve until SIGINT or SIGTERM; `announce(card_url, rpc_url)` once listening, for
    each agent served (the first one's card at the well-known path); the `state` file
    says so meanwhile. gRPC, when configured, serves the first."""
    mount = mounts[0]
    app = web.Application()
    add_a2a_routes(app, mounts)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    grpc: Any = None
    try:
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        shown = f"[{host}]" if ":" in host else host
        base = f"http://{shown}:{bound}"
        rpc = f"{base}{mount.path}"
        if mount.settings.grpc_port is not None:
            grpc = _grpc_server(mount, host, mount.settings.grpc_port, rpc)
            await grpc.start()
        if state is not None:
            record(state, url=rpc, grpc=grpc.target if grpc else None)
        announce(f"{base}{AGENT_CARD_WELL_KNOWN_PATH}", rpc)
        for other in mounts[1:]:
            announce(f"{base}{other.path}{AGENT_CARD_WELL_KNOWN_PATH}", f"{base}{other.path}")
        if grpc is not None:
            print(f"grpc: {grpc.target}", flush=True)
        settle()
        await until_stopped()
        log.info("stopping the A2A server")
    finally:
        if state is not None:
            forget(state)
        if grpc is not None:
            await grpc.stop()
        for each in mounts:
            await each.aclose()
        await runner.cleanup()


def _grpc_server(mount: A2AMount, host: str, port: int, rpc: str) -> Any:
    """The gRPC binding, loaded only now; `ConfigError` when grpcio is not installed."""
    try:
        from raven.a2a.grpc_binding import GrpcServer
    except ImportError as exc:
        raise ConfigError(
            f"a2a.server.grpcPort is set, but gRPC is not installed ({exc.name}): install "
            "raven-agents[grpc], or clear grpcPort"
        ) from None
    return GrpcServer(mount, host, port, rpc)
