"""The `raven` program: assembles the command groups and maps errors to exit codes."""

from __future__ import annotations

import sys

import click
import typer

from raven.cli import a2a_cmd, acp, chat, config_cmd, mcp_cmd, run, sessions_cmd

app = typer.Typer(
    name="raven",
    help="Raven: a personal agent for the command line that speaks ACP, A2A and MCP.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("run")(run.run_command)
app.command("chat")(chat.chat_command)
app.command("acp")(acp.acp_command)
app.add_typer(config_cmd.app, name="config")
app.add_typer(sessions_cmd.app, name="sessions")
app.add_typer(mcp_cmd.app, name="mcp")
app.add_typer(a2a_cmd.app, name="a2a")


def main() -> None:
    """Run the CLI; Raven's errors become a message on stderr and their exit code."""
    from raven.errors import RavenError

    try:
        code = app(standalone_mode=False)
    except RavenError as exc:
        print(f"raven: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        print("raven: aborted", file=sys.stderr)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
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
