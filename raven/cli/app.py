"""The typer application: every command group, and Raven's errors mapped to exit codes."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from raven.cli import (
    a2a_cmd,
    acp,
    agents_cmd,
    chat,
    config_cmd,
    demo_cmd,
    gateway_cmd,
    mcp_cmd,
    models_cmd,
    run,
    sessions_cmd,
    setup_cmd,
)
from raven.cli.help import Typer
from raven.cli.options import ConfigOption

app = Typer(
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


app.command("demo")(demo_cmd.demo_command)
app.command("setup")(setup_cmd.setup_command)
app.command("run")(run.run_command)
app.command("chat")(chat.chat_command)
app.add_typer(acp.app, name="acp")
app.command("gateway")(gateway_cmd.gateway_command)
app.command("web")(gateway_cmd.web_command)
app.add_typer(models_cmd.app, name="models")
app.add_typer(config_cmd.app, name="config")
app.add_typer(sessions_cmd.app, name="sessions")
app.add_typer(mcp_cmd.app, name="mcp")
app.add_typer(a2a_cmd.app, name="a2a")
app.add_typer(agents_cmd.app, name="agents")


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
