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
    """Connect every configured server and list its tools under the names the model sees."""
    statuses = _statuses(config, None)
    if not statuses:
        typer.echo("no MCP servers are configured (add them under mcpServers)")
        return
    _print(statuses)


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


def _statuses(config: str | None, only: str | None) -> list[ServerStatus]:
    import asyncio

    from raven.cli.options import load
    from raven.config import ConfigError

    cfg, paths = load(config, "cli")
    specs = cfg.mcp_servers
    if only is not None:
        specs = [s for s in specs if s.name == only]
        if not specs:
            known = ", ".join(s.name for s in cfg.mcp_servers) or "none configured"
            raise ConfigError(f"no MCP server {only!r} in mcpServers ({known})")
        specs = [s.model_copy(update={"enabled": True}) for s in specs]

    async def check() -> list[ServerStatus]:
        from raven.mcp import McpScope

        scope = McpScope(specs, paths.logs_dir)
        try:
            return await scope.status()
        finally:
            await scope.aclose()

    return asyncio.run(check())


def _print(statuses: list[ServerStatus]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("server", "status", "tool (as the model sees it)", "server's name", box=None)
    for s in statuses:
        status = "ready" if s.status == "ready" else f"{s.status}: {s.problem or ''}"
        if not s.tools:
            table.add_row(s.name, status, "-", "-")
        for i, (model_name, remote) in enumerate(s.tools):
            table.add_row(s.name if i == 0 else "", status if i == 0 else "", model_name, remote)
    Console(highlight=False).print(table)
