"""Running the gateway: listen, say where (and the login link), keep a state file, stop cleanly.

The state file (`gateway.json` in the data dir) names the running gateway's pid and
URL, so a second one on the same port can say which is in the way. Only the CLI
calls `serve`.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable, Mapping
from pathlib import Path

from aiohttp import web

from raven.config import ConfigError, GatewayConfig
from raven.engine import Runtime
from raven.errors import RavenError
from raven.gateway.app import A2A_MOUNTED, Endpoint, make_app
from raven.gateway.auth import Gatekeeper, load_or_mint_token
from raven.heap import settle
from raven.origins import origin_of
from raven.running import GATEWAY, forget, record, recorded, running
from raven.signals import until_stopped

log = logging.getLogger(__name__)


class GatewayInUse(RavenError):
    """The port is taken (by another gateway, when the state file says so)."""


async def serve(
    runtime: Runtime,
    settings: GatewayConfig,
    announce: Callable[[str, str], None],
    mount: Callable[[web.Application], bool] | None = None,
    endpoints: Mapping[str, Endpoint] = {},
) -> None:
    """Serve until SIGINT or SIGTERM; `announce(url, login_link)` once listening. `mount`
    adds other routes to the app (the A2A face) and says whether it did; `endpoints` are
    other faces', by path, behind the gateway's gate (ACP)."""
    token = load_or_mint_token(runtime.paths.config_dir)
    shown = shown_host(settings.host)
    gate = Gatekeeper(token, allowed_hosts(shown, settings.port, settings.public_url))
    app = make_app(runtime, gate, endpoints)
    if mount is not None:
        app[A2A_MOUNTED] = mount(app)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    state = runtime.paths.data_dir / GATEWAY
    try:
        port = await listen(runner, settings, lambda: _in_use(state, settings.port))
        gate.allowed_hosts = allowed_hosts(shown, port, settings.public_url)
        url = f"http://{shown}:{port}"
        a2a = f"{url}{runtime.config.a2a.server.path}" if app.get(A2A_MOUNTED) else None
        record(state, url=url, a2a=a2a)
        announce(url, f"{url}/login?code={gate.new_login_code()}")
        settle()
        await until_stopped()
        log.info("stopping the gateway")
    finally:
        await runner.cleanup()
        forget(state)


async def listen(runner: web.AppRunner, settings: GatewayConfig, in_use: Callable[[], str]) -> int:
    """Serve `runner` where `settings` say; the port (the real one when port 0 let the
    system pick). A port in use is `GatewayInUse`, saying `in_use()`."""
    try:
        await web.TCPSite(runner, settings.host, settings.port).start()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise GatewayInUse(in_use()) from None
        raise
    return int(runner.addresses[0][1])


def shown_host(host: str) -> str:
    """The host as a URL names it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def allowed_hosts(shown: str, port: int, public_url: str | None) -> set[str]:
    """The Host headers a browser on this machine sends to the gateway (and, with
    `publicUrl`, a browser reaching it there)."""
    hosts = {f"{shown}:{port}".lower(), f"localhost:{port}", f"127.0.0.1:{port}"}
    if public_url is not None:
        scheme, host, public_port = origin_of(public_url)
        named = f"[{host}]" if ":" in host else host
        hosts.add(f"{named}:{public_port}")
        if public_port == {"http": 80, "https": 443}[scheme]:
            hosts.add(named)  # browsers leave the default port out
    return hosts


def _in_use(state: Path, port: int) -> str:
    running = recorded(state)
    if running and "pid" in running and "url" in running:
        return (
            f"a gateway is already running on port {port}: pid {running['pid']}, "
            f"{running['url']}; stop it or choose another --port"
        )
    return f"port {port} is in use by another program; choose another --port"


def running_url(data_dir: Path) -> str | None:
    """The URL of the gateway the state file names, if its process is alive."""
    state = running(data_dir / GATEWAY)
    return str(state["url"]) if state and "url" in state else None


def check_settings(settings: GatewayConfig) -> None:
    from raven.origins import is_loopback

    if not is_loopback(settings.host) and not settings.allow_remote:
        raise ConfigError(
            f"refusing to listen on {settings.host}, which is not a loopback address; "
            "pass --allow-remote if you mean it"
        )
