"""`raven acp`: the ACP server on stdin/stdout, launched by editors.

The options as typer shows them; `raven.cli.acp_launch` does the work, and the
program's entry point reaches it without typer when it can.
"""

from __future__ import annotations

from typing import Annotated

import typer

from raven.cli.options import ConfigOption


def acp_command(
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model of new sessions (a model id).")
    ] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="Mode of new sessions.")] = None,
    config: ConfigOption = None,
) -> int:
    """Serve the Agent Client Protocol on stdin/stdout (editors launch this)."""
    from raven.cli.acp_launch import launch

    return launch(config, model, mode)
