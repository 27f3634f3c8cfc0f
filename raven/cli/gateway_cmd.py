"""`raven gateway` and `raven web`: Raven RPC and the web UI for browsers and terminal UIs,
on loopback by default."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from raven.cli.options import ConfigOption

if TYPE_CHECKING:
    from pathlib import Path

    from raven.config import GatewayConfig, Paths, RavenConfig

HostOption = Annotated[str | None, typer.Option("--host", help="Address to listen on.")]
PortOption = Annotated[int | None, typer.Option("--port", help="Port (default 8700).")]
RemoteOption = Annotated[bool, typer.Option("--allow-remote", help="Allow a non-loopback address.")]


def gateway_command(
    host: HostOption = None,
    port: PortOption = None,
    allow_remote: RemoteOption = False,
    config: ConfigOption = None,
) -> None:
    """Serve Raven RPC (/rpc), ACP (/acp: WebSocket and Streamable HTTP) and the web UI (/);
    prints the URL and a one-time login link."""
    cfg, paths, settings = _settings(config, "gateway", host, port, allow_remote)

    def announce(url: str, login: str) -> None:
        socket = "ws" + url.removeprefix("http")
        print(f"gateway: {url} (Raven RPC on {url}/rpc, ACP on {socket}/acp)", flush=True)
        print(f"login:   {login} (one use)", flush=True)

    _serve(cfg, paths, settings, announce)


def web_command(
    open_browser: Annotated[
        bool,
        typer.Option("--open/--no-open", help="Open the browser, or only print the login link."),
    ] = True,
    host: HostOption = None,
    port: PortOption = None,
    allow_remote: RemoteOption = False,
    config: ConfigOption = None,
) -> None:
    """Open the web UI: on the running gateway, or on one started here (until Ctrl-C)."""
    from raven.gateway.serve import running_url

    cfg, paths, settings = _settings(config, "web", host, port, allow_remote)
    running = running_url(paths.data_dir)
    if running is not None:
        login = fresh_login_link(running, paths.config_dir)
        print(f"web:     {running} (the running gateway)", flush=True)
        _show(login, open_browser)
        return

    def announce(url: str, login: str) -> None:
        print(f"web:     {url} (Ctrl-C stops the gateway)", flush=True)
        _show(login, open_browser)

    _serve(cfg, paths, settings, announce)


def _show(login: str, open_browser: bool) -> None:
    if open_browser:
        if open_in_browser(login):
            print("opened the login link in your browser", flush=True)
            return
        print("no browser to open here; open the link yourself", flush=True)
    print(f"login:   {login} (one use)", flush=True)


def open_in_browser(url: str) -> bool:
    """Open `url` in the user's graphical browser (or `$BROWSER`); False when there is none.

    Without a display, Python would fall back to a text browser taking over the terminal.
    """
    import os
    import sys
    import webbrowser

    graphical = sys.platform in ("darwin", "win32") or any(
        os.environ.get(name) for name in ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY")
    )
    return graphical and webbrowser.open(url)


def fresh_login_link(url: str, config_dir: Path) -> str:
    """A fresh one-time login link from the gateway at `url`, asked with the token."""
    import httpx

    from raven.config import ConfigError
    from raven.gateway.auth import TOKEN_FILE

    try:
        token = (config_dir / TOKEN_FILE).read_text(encoding="utf-8").strip()
        reply = httpx.post(
            url + "/login-links",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
            follow_redirects=False,
        )
        reply.raise_for_status()
        return url + str(reply.json()["path"])
    except (OSError, httpx.HTTPError, ValueError, KeyError) as exc:
        raise ConfigError(f"the gateway at {url} did not give a login link: {exc}") from None


def _settings(
    config: str | None, face: str, host: str | None, port: int | None, allow_remote: bool
) -> tuple[RavenConfig, Paths, GatewayConfig]:
    from raven.cli.options import load
    from raven.gateway.serve import check_settings

    cfg, paths = load(config, face)
    settings = cfg.gateway.model_copy(
        update={
            "host": host or cfg.gateway.host,
            "port": cfg.gateway.port if port is None else port,
            "allow_remote": allow_remote or cfg.gateway.allow_remote,
        }
    )
    check_settings(settings)
    return cfg, paths, settings


def _serve(
    cfg: RavenConfig,
    paths: Paths,
    settings: GatewayConfig,
    announce: Callable[[str, str], None],
) -> None:
    import asyncio

    from raven.compose.gateway import serve_gateway

    asyncio.run(serve_gateway(cfg, paths, settings, announce))
