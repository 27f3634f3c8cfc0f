"""`raven acp`: the ACP server on stdin/stdout, launched by editors; with `--listen`, on a
port for editors elsewhere (`raven acp token` prints the token they need).

The options as typer shows them; `raven.cli.acp_launch` does the work, and the
program's entry point reaches it without typer when it can.
"""

from __future__ import annotations

from typing import Annotated

import typer

from raven.cli.help import Typer
from raven.cli.options import ConfigOption

app = Typer(
    invoke_without_command=True,
    no_args_is_help=False,
    help="Serve the Agent Client Protocol on stdin/stdout (editors launch this), or on a "
    "port with --listen.",
)


@app.callback()
def acp_command(
    ctx: typer.Context,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model of new sessions (a model id).")
    ] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="Mode of new sessions.")] = None,
    listen: Annotated[
        str | None,
        typer.Option(
            "--listen",
            metavar="[HOST:]PORT",
            help="Serve ACP at http://HOST:PORT/acp (WebSocket and Streamable HTTP) instead "
            "of stdio; loopback unless HOST is named. Clients send `raven acp token`.",
        ),
    ] = None,
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="With --listen: allow a non-loopback address.")
    ] = False,
    config: ConfigOption = None,
) -> int:
    """Serve the Agent Client Protocol on stdin/stdout (editors launch this), or on a port."""
    if ctx.invoked_subcommand is not None:
        return 0
    if listen is not None:
        return _listen(config, model, mode, listen, allow_remote)
    from raven.cli.acp_launch import launch

    return launch(config, model, mode)


@app.command("token")
def token_command(config: ConfigOption = None) -> None:
    """Print the token clients of `raven acp --listen` send (`Authorization: Bearer …`)."""
    from raven.compose.acp_listen import acp_token
    from raven.config.paths import resolve_paths

    print(acp_token(resolve_paths(config)))


def _listen(
    config: str | None, model: str | None, mode: str | None, listen: str, allow_remote: bool
) -> int:
    import asyncio

    from raven.cli.acp_launch import check_start
    from raven.cli.options import load
    from raven.compose.acp_listen import serve_acp, where
    from raven.config import ConfigError
    from raven.gateway.serve import check_settings

    try:
        host, port = where(listen)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    cfg, paths = load(config, "acp")
    check_start(paths.config_file, paths.config_named, model, mode)
    cfg = cfg.model_copy(
        update={
            "default_model": model or cfg.default_model,
            "default_mode": mode or cfg.default_mode,
        }
    )
    settings = cfg.gateway.model_copy(
        update={"host": host, "port": port, "allow_remote": allow_remote, "public_url": None}
    )
    check_settings(settings)

    def announce(url: str) -> None:
        socket = "ws" + url.removeprefix("http")
        print(f"acp: {url} (Streamable HTTP) and {socket} (WebSocket)", flush=True)
        print("token: `raven acp token` prints it (Authorization: Bearer …)", flush=True)

    asyncio.run(serve_acp(cfg, paths, settings, announce))
    return 0
