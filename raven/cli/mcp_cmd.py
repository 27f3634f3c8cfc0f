"""`raven mcp list | test NAME`: the configured MCP servers, connected and checked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from raven.cli.help import Typer
from raven.cli.options import ConfigOption

if TYPE_CHECKING:
    from raven.mcp import ServerStatus

app = Typer(help="Check the configured MCP servers.", no_args_is_help=True)


@app.command("list")
def list_command(config: ConfigOption = None) -> None:
    """Connect every enabled server and list its tools under the names the model sees.

    Exits 1 when servers are enabled and none of them can be used.
    """
    statuses = _statuses(config, None)
    if not statuses:
        typer.echo("no MCP servers are configured (add them under mcpServers)")
        return
    _print(statuses)
    enabled = [s for s in statuses if s.status != DISABLED]
    if enabled and all(s.status != "ready" for s in enabled):
        raise typer.Exit(1)


@app.command("test")
def test_command(
    name: Annotated[str, typer.Argument(help="Server name from mcpServers.")],
    config: ConfigOption = None,
) -> None:
    """Connect one server, list its tools, and exit non-zero if it cannot be used."""
    statuses = _statuses(config, name)
    _print(statuses)
    if statuses[0].status != "ready":
        raise typer.Exit(1)


DISABLED = "disabled"


def _statuses(config: str | None, only: str | None) -> list[ServerStatus]:
    """Each server's status; disabled servers are listed, never started."""
    import asyncio

    from raven.cli.options import load
    from raven.config import ConfigError
    from raven.mcp import ServerStatus

    cfg, paths = load(config, "cli", quiet=True)
    specs = cfg.mcp_servers
    if only is not None:
        specs = [s for s in specs if s.name == only]
        if not specs:
            known = ", ".join(s.name for s in cfg.mcp_servers) or "none configured"
            raise ConfigError(f"no MCP server {only!r} in mcpServers ({known})")
        if not specs[0].enabled:
            raise ConfigError(
                f'MCP server {only!r} is disabled ("enabled": false) and is never started; '
                "enable it to test it"
            )

    async def check() -> list[ServerStatus]:
        from raven.mcp import McpScope

        scope = McpScope(specs, paths.logs_dir)
        try:
            return await scope.status()
        finally:
            await scope.aclose()

    found = {s.name: s for s in asyncio.run(check())}
    return [found.get(s.name) or ServerStatus(s.name, DISABLED, None, []) for s in specs]


def _print(statuses: list[ServerStatus]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("server", "status", "tool (as the model sees it)", "server's name", box=None)
    for s in statuses:
        status = s.status if s.problem is None else f"{s.status}: {s.problem}"
        if not s.tools:
            table.add_row(s.name, status, "-", "-")
        for i, (model_name, remote) in enumerate(s.tools):
            table.add_row(s.name if i == 0 else "", status if i == 0 else "", model_name, remote)
    Console(markup=False, highlight=False).print(table)  # names and problems are text
