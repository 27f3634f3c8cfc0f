"""`raven acp --listen`: ACP on a port of its own, at `/acp`, over WebSocket and Streamable
HTTP, on one runtime shared by every connection.

Behind a bearer token of its own (`acp.token` in the config dir, 0600, minted on first
use; `raven acp token` prints it), with Host and Origin checked as the gateway checks
them. Refuses a non-loopback address unless `allow_remote` says so. Never logs the token.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from raven.compose.runtime import build_runtime
from raven.config import GatewayConfig, Paths, RavenConfig

TOKEN_FILE = "acp.token"


def acp_token(paths: Paths) -> str:
    """The token `raven acp --listen` wants, minted on first use."""
    from raven.gateway.auth import load_or_mint_token

    return load_or_mint_token(paths.config_dir, TOKEN_FILE)


def where(listen: str) -> tuple[str, int]:
    """`[HOST:]PORT` (an IPv6 host in brackets) as (host, port); loopback unless named.
    Raises `ValueError` naming what is wrong."""
    host, colon, port = listen.rpartition(":")
    if not colon:
        host, port = "127.0.0.1", listen
    host = host.removeprefix("[").removesuffix("]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen {listen!r}: expected [HOST:]PORT, a port from 0 to 65535")
    return host, int(port)


async def serve_acp(
    cfg: RavenConfig, paths: Paths, settings: GatewayConfig, announce: Callable[[str], None]
) -> None:
    """Serve until SIGINT or SIGTERM; `announce(url)` once listening. `settings` say where
    (`check_settings` has passed them)."""
    from raven.acp.endpoint import ACP_PATH, AcpEndpoint
    from raven.gateway.app import gated_app
    from raven.gateway.auth import Gatekeeper
    from raven.gateway.serve import allowed_hosts, listen, shown_host
    from raven.heap import settle
    from raven.signals import until_stopped

    runtime = build_runtime(cfg, paths, face="acp")
    shown = shown_host(settings.host)
    gate = Gatekeeper(acp_token(paths), allowed_hosts(shown, settings.port, None))
    app = gated_app(gate, {ACP_PATH: AcpEndpoint(runtime)})

    async def start(_: web.Application) -> None:
        await runtime.start()

    app.on_startup.append(start)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        in_use = f"port {settings.port} is in use by another program; choose another port"
        port = await listen(runner, settings, lambda: in_use)
        gate.allowed_hosts = allowed_hosts(shown, port, None)
        announce(f"http://{shown}:{port}{ACP_PATH}")
        settle()
        await until_stopped()
    finally:
        await runner.cleanup()
        await runtime.aclose()
