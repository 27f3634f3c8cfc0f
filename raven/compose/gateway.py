"""The gateway with everything it serves: Raven RPC, the web UI and ACP (remote) on one
runtime, and the A2A face mounted beside them when it is enabled (never inside a
sub-agent)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web

from raven.compose.runtime import build_runtime, served_agents
from raven.config import GatewayConfig, Paths, RavenConfig

log = logging.getLogger("raven.gateway")


async def serve_gateway(
    cfg: RavenConfig,
    paths: Paths,
    settings: GatewayConfig,
    announce: Callable[[str, str], None],
) -> None:
    """Serve until stopped (SIGTERM/SIGINT); `announce(label, text)` tells the user where."""
    from raven.gateway.serve import serve

    runtime = build_runtime(cfg, paths, face="gateway")
    mounts: list[Any] = []

    def mount_a2a(app: web.Application) -> bool:
        if not cfg.a2a.server.enabled:
            return False
        from raven.a2a import SubagentRefused, add_a2a_routes, build_mounts
        from raven.gateway.app import HUB

        agents = served_agents(cfg, paths, cfg.a2a.server.agents)
        local = app[HUB].local_asker
        try:
            mounts.extend(build_mounts(runtime, cfg.a2a.server, agents, local=local))
        except SubagentRefused as exc:
            log.warning("A2A not mounted: %s", exc)
            return False
        add_a2a_routes(app, mounts)
        return True

    from raven.acp.endpoint import ACP_PATH, AcpEndpoint

    try:
        await serve(runtime, settings, announce, mount_a2a, {ACP_PATH: AcpEndpoint(runtime)})
    finally:
        for mount in mounts:
            await mount.aclose()
        await runtime.aclose()
