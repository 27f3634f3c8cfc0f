"""`raven gateway`: Raven RPC for web and terminal UIs, on loopback by default."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from raven.cli.options import ConfigOption

if TYPE_CHECKING:
    from aiohttp import web


def gateway_command(
    host: Annotated[str | None, typer.Option("--host", help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option("--port", help="Port (default 8700).")] = None,
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="Allow a non-loopback address.")
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Serve Raven RPC over WebSocket (/rpc); prints the URL and a one-time login link."""
    import asyncio
    import logging

    from raven.cli.options import load
    from raven.cli.runtime import build_runtime
    from raven.gateway.serve import check_settings, serve

    cfg, paths = load(config, "gateway")
    settings = cfg.gateway.model_copy(
        update={
            "host": host or cfg.gateway.host,
            "port": cfg.gateway.port if port is None else port,
            "allow_remote": allow_remote or cfg.gateway.allow_remote,
        }
    )
    check_settings(settings)

    def announce(url: str, login: str) -> None:
        print(f"gateway: {url} (Raven RPC on {url}/rpc)", flush=True)
        print(f"login:   {login} (one use)", flush=True)

    async def main() -> None:
        runtime = build_runtime(cfg, paths, face="gateway")
        mounts: list[Any] = []

        def mount_a2a(app: web.Application) -> bool:
            """The A2A face on the gateway when enabled; never inside a sub-agent."""
            if not cfg.a2a.server.enabled:
                return False
            from raven.a2a import SubagentRefused, add_a2a_routes, build_mount
            from raven.gateway.app import HUB

            try:
                mounts.append(build_mount(runtime, cfg.a2a.server, local=app[HUB].local_asker))
            except SubagentRefused as exc:
                logging.getLogger("raven.gateway").warning("A2A not mounted: %s", exc)
                return False
            add_a2a_routes(app, mounts[-1])
            return True

        try:
            await serve(runtime, settings, announce, mount_a2a)
        finally:
            for mount in mounts:
                await mount.aclose()
            await runtime.aclose()

    asyncio.run(main())
