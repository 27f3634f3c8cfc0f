"""`raven demo`: the command; the demo itself is `raven.demo.tour`, imported when it runs."""

from __future__ import annotations

from typing import Annotated

import typer


def demo_command(
    keep: Annotated[
        bool, typer.Option("--keep", help="Leave the temporary home for inspection.")
    ] = False,
    web: Annotated[
        bool,
        typer.Option("--web", help="Then leave the gateway running and open the web UI."),
    ] = False,
) -> None:
    """Show every face working together: A2A, sub-agents over ACP, the gateway, sessions.

    Offline, with nothing to configure; everything runs in a temporary home that is
    removed at the end (unless --keep), and every process started is stopped.
    """
    from raven.demo.tour import run_demo

    raise typer.Exit(run_demo(web, keep))
