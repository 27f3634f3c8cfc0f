"""The typer application: every command group, and Raven's errors mapped to exit codes.

A command's module is imported, and its click command built, only when that command
runs or help lists it: typer would otherwise build every command's parameters on every
start, about a tenth of a short command's instructions. Never imports what a command
does; each command module imports its own work inside the function that does it.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup

from raven.cli.help import Group, Typer
from raven.cli.options import ConfigOption

COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("raven.cli.demo_cmd", "demo_command"),
    "setup": ("raven.cli.setup_cmd", "setup_command"),
    "run": ("raven.cli.run", "run_command"),
    "chat": ("raven.cli.chat", "chat_command"),
    "gateway": ("raven.cli.gateway_cmd", "gateway_command"),
    "web": ("raven.cli.gateway_cmd", "web_command"),
    "acp": ("raven.cli.acp", "app"),
    "models": ("raven.cli.models_cmd", "app"),
    "config": ("raven.cli.config_cmd", "app"),
    "sessions": ("raven.cli.sessions_cmd", "app"),
    "mcp": ("raven.cli.mcp_cmd", "app"),
    "a2a": ("raven.cli.a2a_cmd", "app"),
    "agents": ("raven.cli.agents_cmd", "app"),
}
"""Each top-level command, in the order help lists them: (module, function or Typer)."""


def build_command(name: str) -> TyperCommand | TyperGroup | None:
    """The click command `raven NAME` runs, built from its module; None if there is none."""
    where = COMMANDS.get(name)
    if where is None:
        return None
    # __import__ rather than importlib.import_module, which -X importtime does not see.
    module, attribute = where
    target = getattr(__import__(module, fromlist=[attribute]), attribute)
    if isinstance(target, typer.Typer):
        command: TyperCommand | TyperGroup = typer.main.get_group(target)
    else:
        single = Typer(add_completion=False)
        single.command(name)(target)
        built = typer.main.get_command(single)
        assert isinstance(built, TyperCommand)
        command = built
    command.name = name
    return command


class _Commands(Group):
    """The root group, whose commands are built when asked for (`build_command`)."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> TyperCommand | TyperGroup | None:
        return build_command(cmd_name)


app = Typer(
    cls=_Commands,
    name="raven",
    help="Raven: a personal agent for the command line that speaks ACP, A2A and MCP.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


def _show_version(value: bool) -> None:
    if value:
        from raven.cli.main import print_version

        print_version()
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the version, the Python in use and the config path, then exit.",
            callback=_show_version,
            is_eager=True,
        ),
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Raven: a personal agent for the command line that speaks ACP, A2A and MCP."""
    if config is not None:
        # `raven --config X run …` as well as `raven run --config X …`: every command (and
        # every Raven it starts) reads the file RAVEN_CONFIG names unless it is given one.
        import os

        os.environ["RAVEN_CONFIG"] = config


def run_app() -> None:
    """Run the CLI; Raven's errors become a message on stderr and their exit code."""
    from raven.errors import RavenError

    try:
        code = app(standalone_mode=False, prog_name="raven")
    except RavenError as exc:
        print(f"raven: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("raven: aborted", file=sys.stderr)
        sys.exit(130)
    except typer.TyperException as exc:
        # Usage errors (typer's vendored click exceptions) print typer's usage message.
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            print(f"raven: error: {exc.format_message()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except Exception as exc:
        import logging

        logging.getLogger("raven").exception("unexpected error")
        print(
            f"raven: unexpected error: {type(exc).__name__}: {exc} (details in the log)",
            file=sys.stderr,
        )
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
